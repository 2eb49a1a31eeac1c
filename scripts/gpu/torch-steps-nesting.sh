#!/usr/bin/env bash
# --torch-steps with torch's own profiler ranges (emit_nvtx): the step ranges must sit at the top,
# each holding one iteration's Optimizer.step range, not nested inside the first one.
# Needs .gpu/ and .real/nanogpt. Prints the top of ranges.csv's tree.
set -u
G=$PWD/.gpu/bin/gmprof; W=/tmp/tsn; rm -rf $W; mkdir -p $W
cd .real/nanogpt
timeout 240 $G run --mode trace --torch-steps -o $W/out -- python3 torch_launch.py --emit-nvtx train.py --dataset=synthetic \
  --batch_size=8 --block_size=256 --n_layer=2 --n_head=4 --n_embd=256 --eval_interval=1000 --eval_iters=1 --log_interval=1 \
  --dtype=bfloat16 --always_save_checkpoint=False --out_dir=/tmp/nanogpt-out --max_iters=5 --compile=False 2>&1 | grep -E "^gmprof" | head -5
python3 - $W/out/ranges.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#")))
paths = [r["path"] for r in rows] if rows and "path" in rows[0] else [r.get("range_path", "") for r in rows]
depth1 = sorted({p for p in paths if p.count("/") == 0})
print("top-level range names:", depth1[:10])
steps = [p for p in paths if p == "step"]
print("step instances:", len(steps))
inside = [p for p in paths if p.startswith("step/") and p.count("/") == 1]
print("ranges directly under step (first 8 distinct):", sorted(set(inside))[:8])
def step_inside_optimizer(p):
    segs = p.split("/")
    return any(s.startswith("Optimizer.step") and "step" in segs[i + 1:] for i, s in enumerate(segs))
nested_opt = [p for p in paths if step_inside_optimizer(p)]
print("paths where a step range sits inside an Optimizer.step range:", len(nested_opt))
PY
