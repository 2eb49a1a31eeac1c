#!/usr/bin/env bash
# `gmprof run` (injection) on the GPU machine: an unmodified C/CUDA program with NVTX
# ranges, an unmodified PyTorch training loop with torch.cuda.nvtx ranges, and programs
# that fail or never create a context. Expects the .gpu/ that scripts/gpu-stage stages
# (with .gpu/lib/libgmprof.so and .gpu/python).
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
export LD_LIBRARY_PATH=$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
export GMPROF_LIBRARY=$PWD/.gpu/lib/libgmprof.so PYTHONUNBUFFERED=1
out=${OUT:-out/inject-validate}; mkdir -p "$out"
G=.gpu/bin/gmprof
run() { echo; echo "\$ $*"; timeout "${T:-300}" "$@"; echo "[exit $?]"; }
DRAM=dram__bytes_read.sum,dram__bytes_write.sum
STEPS=${STEPS:-3}

# C/CUDA: 5 steps x (add, scale) + 1 kernel in a range left open.
run nvcc -O2 -arch=sm_90 -o /tmp/nvtx_vector_add examples/c/nvtx_vector_add.cu
echo '{"step": 10, "step/add": 5, "step/scale": 5, "left open": 1}' > /tmp/c_counts.json
run $G run --metrics $DRAM -o "$out/c-kernel-replay" -- /tmp/nvtx_vector_add 5
run python3 scripts/check/check_run.py "$out/c-kernel-replay" --counts /tmp/c_counts.json \
  --expect-dram step/add:128:64 --expect-dram step/scale:64:64
run $G run --mode trace -o "$out/c-trace" -- /tmp/nvtx_vector_add 5
run python3 scripts/check/check_run.py "$out/c-trace" --counts /tmp/c_counts.json
run $G run --nvtx-include add --metrics $DRAM -o "$out/c-include" -- /tmp/nvtx_vector_add 2
run $G report "$out/c-include" --csv

# PyTorch, no code change: torch.profiler's counts first, then gmprof run per mode.
TT=.gpu/python/examples/torch_train.py
ARGS="--steps $STEPS --known-copy-mb 1024"
run python3 $TT $ARGS --count-kernels "$out/torch_counts.json"
for mode in trace kernel_replay; do
  T=500 run $G run --mode $mode --metrics $DRAM -o "$out/torch-$mode" -- python3 $TT $ARGS
  dram=""; [ $mode = kernel_replay ] && dram="--expect-dram step/copy:1024:1024"
  run python3 scripts/check/check_run.py "$out/torch-$mode" --counts "$out/torch_counts.json" $dram
done
run $G run --mode trace --nvtx-include backward -o "$out/torch-include" -- python3 $TT --steps 2
run $G report "$out/torch-include"

# Failures: a program that exits non-zero after using the GPU, one that never creates a
# context, one that never starts CUDA.
run $G run --mode trace -o "$out/fail" -- python3 -c "import torch; torch.ones(8, device='cuda').sum().item(); raise SystemExit(4)"
run $G run --mode trace -o "$out/no-context" -- python3 -c "import torch; print('cuda available', torch.cuda.is_available())"
run $G run --mode trace -o "$out/no-cuda" -- python3 -c "print('no cuda here')"
run $G run --mode fastest -o "$out/bad" -- true
run $G run --metrics dram__bytes_red.sum -o "$out/bad-metric" -- /tmp/nvtx_vector_add 1
cat "$out/bad-metric/injection.json" 2>/dev/null
