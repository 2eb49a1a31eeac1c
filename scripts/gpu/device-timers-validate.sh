#!/usr/bin/env bash
# In-kernel region timers on a GPU machine: builds examples/c/device_timers.cu with nvcc, checks
# that include/gmprof_device.cuh compiles with NVRTC and with GMPROF_DT_DISABLE, runs the
# example under gmprof (trace mode) and checks its outputs (scripts/check/device_timers_check.py:
# accuracy of 1 us / 10 us / 1 ms spins, a > 5 s spin with no wrap, every lane once, SM ids,
# overflow counted, regions inside their kernel slices), runs `gmprof check-trace`, prints the
# marker overhead, then does the same for the Triton example (python/examples/).
#
#   scripts/gpu/device-timers-validate.sh [OUT]        (LONG_MS=5500 sets the long spin)
#
# Needs, from the project root: .gpu/lib/libgmprof.so and .gpu/bin/gmprof (scripts/gpu-stage,
# or `cargo build --release --lib --bin gmprof` copied there), nvcc, python3 with torch/triton.
set -uo pipefail
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$CUDA_HOME/bin:$PATH
export LD_LIBRARY_PATH=$PWD/.gpu/lib:$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
export GMPROF_LIBRARY=$PWD/.gpu/lib/libgmprof.so PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
out=${1:-device-timers-out}
rm -rf "$out" && mkdir -p "$out/dump"
status=0
step() { echo "== $*"; "$@" || { echo "FAILED ($?): $*"; status=1; }; }

echo "date: $(date -u '+%F %T UTC')"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc --version | tail -2
step nvcc -O2 -arch=sm_90 -o "$out/device_timers" examples/c/device_timers.cu -Iinclude -L.gpu/lib -lgmprof
step nvcc -O2 -arch=sm_90 -DGMPROF_DT_DISABLE -c -o "$out/disabled.o" examples/c/device_timers.cu -Iinclude
step python3 scripts/check/nvrtc_check.py include/gmprof_device.cuh compute_90

echo "== device_timers $out/c ${LONG_MS:-5500}"
start=$SECONDS
GMPROF_DT_DUMP=$out/dump "$out/device_timers" "$out/c" "${LONG_MS:-5500}" > "$out/c.log" 2>&1
rc=$?
echo "exit $rc after $((SECONDS - start)) s"; cat "$out/c.log"
[ $rc = 0 ] || status=1
sms=$(awk '/^sms:/ {print $2}' "$out/c.log")
step python3 scripts/check/device_timers_check.py "$out/c" "${sms:-0}"
step .gpu/bin/gmprof check-trace "$out/c/trace.json"
echo "== regions.csv (head)"; head -n 14 "$out/c/regions.csv"
ls -la "$out/dump"

echo "== triton"
step python3 python/examples/triton_device_timers.py "$out/triton"
step .gpu/bin/gmprof check-trace "$out/triton/trace.json"
head -n 8 "$out/triton/regions.csv" 2>/dev/null
echo "status: $status"
exit $status
