#!/usr/bin/env bash
# `gmprof run` hears NVTX from the program's first NVTX call: ranges pushed before the first
# CUDA call are adopted, hold their kernels and leave no "unbalanced pop" warning. Expects
# .gpu/bin/gmprof and .gpu/lib/libgmprof.so (scripts/gpu-stage, or a release build copied
# there); writes into $OUT (default out/nvtx-early).
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
export LD_LIBRARY_PATH=$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
export GMPROF_LIBRARY=$PWD/.gpu/lib/libgmprof.so PYTHONUNBUFFERED=1
out=${OUT:-out/nvtx-early}; mkdir -p "$out"
G=.gpu/bin/gmprof
fails=0
run() { echo; echo "\$ $*"; timeout "${T:-300}" "$@"; local rc=$?; echo "[exit $rc]"; [ $rc = 0 ] || fails=$((fails + 1)); }
COUNTS='{"before cuda": 3, "before cuda/init": 1, "after cuda": 2}'

# 1. A range pushed before any CUDA call (with a nested one) and one after, in trace and
#    kernel_replay modes: all three ranges with their kernels, no warning.
run nvcc -O2 -arch=native -o /tmp/nvtx_before_cuda examples/c/nvtx_before_cuda.cu
run $G run --mode trace -o "$out/before-trace" -- /tmp/nvtx_before_cuda
run python3 scripts/check/check_nvtx_early.py "$out/before-trace" --counts "$COUNTS"
run $G run --metrics dram__bytes_read.sum -o "$out/before-kernel-replay" -- /tmp/nvtx_before_cuda
run python3 scripts/check/check_nvtx_early.py "$out/before-kernel-replay" --counts "$COUNTS"

# 2. The program the bug was seen with: "setup" pushed before CUDA, popped after. The
#    summary must say "warnings: 0".
run nvcc -O2 -arch=native -o /tmp/gs examples/c/graph_steps.cu
echo; echo "\$ $G run --mode trace -o $out/graph-steps -- /tmp/gs 6 graph"
timeout 300 $G run --mode trace -o "$out/graph-steps" -- /tmp/gs 6 graph 2>&1 | tee "$out/graph-steps.log"
if grep -q "warnings: 0" "$out/graph-steps.log"; then echo "ok    graph_steps: warnings: 0"; else echo "FAIL  graph_steps: no 'warnings: 0'"; fails=$((fails + 1)); fi
run python3 scripts/check/check_nvtx_early.py "$out/graph-steps"

# 3. The old way, NVTX_INJECTION64_PATH naming libcupti by hand: gmprof starts with CUDA,
#    does not hear the two early pushes, counts their pops and says why.
cupti=$(ls "$CUDA_HOME"/extras/CUPTI/lib64/libcupti.so "$CUDA_HOME"/targets/x86_64-linux/lib/libcupti.so 2>/dev/null | head -1)
rm -rf "$out/libcupti-by-hand"
run env CUDA_INJECTION64_PATH="$GMPROF_LIBRARY" NVTX_INJECTION64_PATH="$cupti" GMPROF_CUPTI_LIB="$cupti" \
  GMPROF_MODE=trace GMPROF_OUT="$out/libcupti-by-hand" /tmp/nvtx_before_cuda
run python3 scripts/check/check_nvtx_early.py "$out/libcupti-by-hand" --started-by "CUDA initialization" --unbalanced 2 \
  --warning-contains "gmprof started with CUDA" --counts '{"before cuda": 0, "after cuda": 2}'

# 4. PyTorch under gmprof run still works with NVTX going through libgmprof.so (every NVTX
#    instance in torch and its libraries is handed on to CUPTI).
TT=python/examples/torch_train.py
run python3 $TT --steps 2 --count-kernels "$out/torch_counts.json"
T=500 run $G run --mode trace -o "$out/torch-trace" -- python3 $TT --steps 2
run python3 scripts/check/check_run.py "$out/torch-trace" --counts "$out/torch_counts.json"
run python3 scripts/check/check_nvtx_early.py "$out/torch-trace" --started-by any --allow-warnings

echo; cat "$out"/*/injection.json | grep -E '"(started_by|nvtx_unbalanced_pops|error)"'
echo; [ $fails = 0 ] && echo "NVTX-EARLY ALL OK" || echo "NVTX-EARLY: $fails step(s) failed"
