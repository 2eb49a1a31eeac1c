#!/usr/bin/env bash
# `gmprof diff` on the GPU: specificity (two runs of one configuration: nothing marked) and
# sensitivity (a variant slower in one place: that place and what holds it marked, nothing
# else), on gmprof's own 6-layer GPT and on nanoGPT's train.py (a program nobody here wrote).
#
#   scripts/gpu-stage --no-tests && (on the GPU machine) bash scripts/gpu/diff-validate.sh
#
# Needs .gpu/ (scripts/gpu-stage) and .real/nanogpt (scripts/real/stage.sh, or its nanoGPT
# part: train.py, model.py, configurator.py, torch_launch.py and data/synthetic). Writes
# everything under $OUT (default out/diff).
#
# - torch_gpt.py (python/examples): module ranges at depth 3 through gmprof.torch's NVTX
#   backend, 30 profiled steps; the variant has MLPs twice as wide (--mlp-ratio 8): its mlp
#   ranges (forward and backward), the blocks, the step and the optimizer hold more work, its
#   attention, layer norms, embeddings and head do not.
# - nanoGPT eager (--compile=False) with an NVTX range per aten op (emit_nvtx) under "step"
#   ranges, 25 iterations; the variant turns the fused attention kernels off (torch_launch.py
#   --math-sdpa): scaled_dot_product_attention and its backward get slower, nothing else.
set -u
ROOT=$PWD
G=$ROOT/.gpu/bin/gmprof
R=$ROOT/${REAL:-.real}
out=$(mkdir -p "${OUT:-out/diff}" && cd "${OUT:-out/diff}" && pwd)
run() { echo; echo "\$ $*"; local t0=$SECONDS; timeout "${T:-300}" "$@"; local rc=$?; echo "[exit $rc, $((SECONDS - t0)) s]"; return $rc; }
head_of() { sed -n '/^gmprof 0/,/^$/p' "$1" | head -3; grep -q '^gmprof 0' "$1" || tail -15 "$1"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
export PYTHONUNBUFFERED=1

TG=(python3 "$ROOT/.gpu/python/examples/torch_gpt.py" gmprof --backend nvtx --active 30)
for v in a b; do
  run "$G" run --mode trace -o "$out/gpt-$v" -- "${TG[@]}" > "$out/gpt-$v.txt" 2>&1; head_of "$out/gpt-$v.txt"
done
run "$G" run --mode trace -o "$out/gpt-wide" -- "${TG[@]}" --mlp-ratio 8 > "$out/gpt-wide.txt" 2>&1; head_of "$out/gpt-wide.txt"
run "$G" diff "$out/gpt-a" "$out/gpt-b" --skip-first 1 --csv "$out/gpt-same.csv" --fail-if-slower 2
run "$G" diff "$out/gpt-a" "$out/gpt-wide" --skip-first 1 --top 40 --csv "$out/gpt-wide.csv" --html "$out/gpt-wide.html" --fail-if-slower 5

NG=(python3 torch_launch.py --step-ranges --emit-nvtx)
NGARGS=(train.py --dataset=synthetic --batch_size=8 --block_size=256 --n_layer=6 --n_head=6 --n_embd=384
  --eval_interval=1000 --eval_iters=1 --log_interval=5 --gradient_accumulation_steps=1 --dtype=bfloat16
  --always_save_checkpoint=False --out_dir=/tmp/nanogpt-out --compile=False --max_iters=25)
cd "$R/nanogpt"
for v in a b; do
  run "$G" run --mode trace -o "$out/ng-$v" -- "${NG[@]}" "${NGARGS[@]}" > "$out/ng-$v.txt" 2>&1; head_of "$out/ng-$v.txt"
done
run "$G" run --mode trace -o "$out/ng-math" -- "${NG[@]}" --math-sdpa "${NGARGS[@]}" > "$out/ng-math.txt" 2>&1; head_of "$out/ng-math.txt"
cd "$ROOT"
run "$G" diff "$out/ng-a" "$out/ng-b" --skip-first 1 --csv "$out/ng-same.csv" --fail-if-slower 2
run "$G" diff "$out/ng-a" "$out/ng-math" --skip-first 1 --top 25 --csv "$out/ng-math.csv" --fail-if-slower 5
for v in gpt-same gpt-wide ng-same ng-math; do
  python3 - "$out/$v.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#"))]
t = [r for r in rows if r["quantity"] == "gpu_time_ns"]
for kind in ("range", "kernel"):
    k = [r for r in t if r["kind"] == kind]
    by = {}
    for r in k:
        by[r["verdict"]] = by.get(r["verdict"], 0) + 1
    print("%s: %s %ss compared, verdicts %s" % (sys.argv[1].rsplit("/", 1)[-1], len(k), kind, dict(sorted(by.items()))))
PY
done
