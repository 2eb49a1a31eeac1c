#!/usr/bin/env bash
# Overhead of the counter modes on the GPU machine: gmprof's example workloads per mode and
# metric set, each against an unprofiled run in the same process (--compare), next to the
# raw-CUPTI floor of bench/range_floor.cu. Expects the staged .gpu/ (gpu-stage --features gpu).
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
export LD_LIBRARY_PATH=$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
ONE=dram__bytes_read.sum,dram__bytes_write.sum
EIGHT=$ONE,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
run() { echo "\$ $*"; timeout "${T:-300}" "$@" 2>&1 | grep -E "overhead|passes=|range_floor|error|dropped|flagged kernel" ; }
nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/range_floor bench/range_floor.cu -I$CUDA_HOME/extras/CUPTI/include \
  -I$CUDA_HOME/targets/x86_64-linux/include -L$CUDA_HOME/targets/x86_64-linux/lib -lcupti -lcuda || exit 1
run /tmp/range_floor 2000 16777216 gpu__time_duration.sum,$ONE
run /tmp/range_floor 2000 16777216 gpu__time_duration.sum,$EIGHT
for set in ONE EIGHT; do
  for mode in per_range per_kernel; do
    run .gpu/bin/synthetic --kernels 2000 --size 16777216 --mode $mode --metrics ${!set} --compare --summary
    run .gpu/bin/train_loop --mode $mode --metrics ${!set} --steps 50 --log-every 0 --compare --out /tmp/tl-$mode-$set
  done
done
run .gpu/bin/synthetic --kernels 2000 --size 16777216 --mode per_range --range-per-kernel --metrics $ONE --compare
