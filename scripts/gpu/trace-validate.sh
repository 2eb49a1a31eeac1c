#!/usr/bin/env bash
# Trace-mode validation and overhead on the GPU machine (after gpu-stage --features gpu).
# Writes to ${OUT:-out/trace-validate}; results are recorded in BENCHMARKS.md.
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH=$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
out=${OUT:-out/trace-validate}; mkdir -p "$out"
run() { echo; echo "\$ $*"; timeout "${T:-120}" "$@"; echo "[exit $?]"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
# Overhead against an unprofiled run of the same launches in the same process.
for i in 1 2 3; do run .gpu/bin/synthetic --kernels 2000 --mode trace --compare | grep overhead; done
for i in 1 2 3; do run .gpu/bin/synthetic --kernels 2000 --size 16777216 --mode trace --compare | grep overhead; done
run .gpu/bin/train_loop --mode trace --steps 50 --log-every 0 --compare --out "$out/trace-async"
run .gpu/bin/train_loop --mode trace --steps 50 --log-every 0 --compare --sync-ranges --out "$out/trace"
run .gpu/bin/gmprof check-trace "$out/trace/trace.json"
.gpu/bin/gmprof check-trace "$out/trace-async/trace.json" > "$out/check-async.log" 2>&1; echo "async trace: $(grep -c kernel_outside_range "$out/check-async.log") kernel_outside_range, $(grep -vc kernel_outside_range "$out/check-async.log") other lines (see check-async.log)"
run .gpu/bin/train_loop --steps 3 --log-every 0 --out "$out/kernel_replay"
run .gpu/bin/gmprof check-trace "$out/kernel_replay/trace.json"
