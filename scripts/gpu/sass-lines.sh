#!/usr/bin/env bash
# sass_hot.csv source lines on the GPU: bench/sass_metrics_floor.cu built with -lineinfo (its own
# kernels have lines, cuBLAS has none) and nanoGPT under torch.compile (Triton kernels carry lines).
# Needs .gpu/ (scripts/gpu-stage --no-tests) and .real/nanogpt; copies the two sass_hot.csv to $OUT.
export CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/extras/CUPTI/lib64:$LD_LIBRARY_PATH
W=/tmp/src; mkdir -p $W; G=$PWD/.gpu/bin/gmprof
nvcc -O2 -std=c++17 -arch=sm_90 -lineinfo -o $W/smf bench/sass_metrics_floor.cu -I$CUDA_HOME/extras/CUPTI/include -L$CUDA_HOME/extras/CUPTI/lib64 -lcupti -lcuda -lcublas 2>&1 | grep error
$G run --mode trace --probe exec_count,gmem_bytes --probe-sass always -o $W/smf-out -- $W/smf plain 2>&1 | grep -E "SASS|probes"
cut -d, -f1,5,6,7,14,15 $W/smf-out/sass_hot.csv | head -12; cut -d, -f1 $W/smf-out/sass_hot.csv | sort | uniq -c
cp $W/smf-out/sass_hot.csv $OUT/smf_sass_hot.csv
cd .real/nanogpt && timeout 200 $G run --mode trace --probe exec_count --probe-sass always --probe-sass-launches 1 -o $W/ng -- python3 torch_launch.py train.py --dataset=synthetic --batch_size=8 --block_size=256 --n_layer=4 --n_head=4 --n_embd=256 --eval_interval=1000 --eval_iters=1 --log_interval=1 --dtype=bfloat16 --always_save_checkpoint=False --out_dir=/tmp/nanogpt-out --max_iters=2 --dropout=0.0 --compile=True 2>&1 | grep -E "SASS|probes|Error|error" | head
python3 - $W/ng/sass_hot.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
with_line = [r for r in rows if r['line']]
print('sass_hot rows %d, with file:line %d; kernels with lines: %d of %d' % (len(rows), len(with_line), len({r['mangled'] for r in with_line}), len({r['mangled'] for r in rows})))
for r in with_line[:3]: print(r['kernel'][:50], r['pc_offset'], r['instructions'], r['file'][-60:], r['line'])
PY
cp $W/ng/sass_hot.csv $OUT/ng_sass_hot.csv
