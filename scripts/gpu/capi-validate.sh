#!/usr/bin/env bash
# The C ABI and the Python module on the GPU machine. Expects the staged .gpu/ plus
# .gpu/lib/libgmprof.so and .gpu/python (copies of target/release/libgmprof.so and python/).
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
export LD_LIBRARY_PATH=$PWD/.gpu/lib:$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
out=${OUT:-out/capi-validate}; mkdir -p "$out"
run() { echo; echo "\$ $*"; timeout "${T:-120}" "$@"; echo "[exit $?]"; }
run nvcc -O2 -arch=sm_90 -o /tmp/vector_add examples/c/vector_add.cu -Iinclude -L.gpu/lib -lgmprof
run /tmp/vector_add "$out/c"
run .gpu/bin/gmprof report "$out/c"
export GMPROF_LIBRARY=$PWD/.gpu/lib/libgmprof.so PYTHONPATH=$PWD/.gpu/python PYTHONUNBUFFERED=1
run python3 .gpu/python/examples/torch_train.py --gmprof --mode trace --sync-on-pop --steps 10 --out "$out/torch-trace"
run .gpu/bin/gmprof report "$out/torch-trace"
run .gpu/bin/gmprof check-trace "$out/torch-trace/trace.json"
T=200 run python3 .gpu/python/examples/torch_train.py --gmprof --mode kernel_replay --steps 2 --out "$out/torch-kr"
run .gpu/bin/gmprof report "$out/torch-kr"
