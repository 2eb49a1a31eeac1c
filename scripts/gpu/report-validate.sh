#!/usr/bin/env bash
# GPU validation of issue 16 (reports at real scale): the chip name in trace mode, the grouped
# summary with --skip-first, and iteration replay of an 8-pass metric set by glob over the
# numbered NVTX steps of python/examples/torch_train.py --numbered, in per_kernel and per_range.
#
#   scripts/gpu-stage && OUT=/some/dir bash scripts/gpu/report-validate.sh
#
# Runs from a copy of the project root that holds .gpu/ (scripts/gpu-stage); needs PyTorch with
# CUDA. Writes log.txt and the three runs' report.json files into $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
export LD_LIBRARY_PATH=$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-gmprof-validate}
mkdir -p "$OUT"
G=$PWD/.gpu/bin/gmprof
T=python/examples/torch_train.py
# 8 passes on GH100 (gmprof passes); smsp__inst_executed.sum gives the HTML report's roofline.
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__inst_executed_pipe_fma.sum
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "== gmprof passes \$M"; $G passes $M
  echo "== too few iterations: fails before the program starts"
  $G run --iteration-replay "Train step *" --iterations 4 --metrics $M -o "$OUT/bad" -- python3 $T --numbered --steps 4; echo "rc=$?"
  echo "== trace, --skip-first 1"
  $G run --mode trace --skip-first 1 -o "$OUT/trace" -- python3 $T --numbered --steps 6; echo "rc=$?"
  echo "== per_kernel iteration replay"
  $G run --iteration-replay "Train step *" --iterations 24 --metrics $M --skip-first 1 --html "$OUT/per_kernel.html" \
    -o "$OUT/per_kernel" -- python3 $T --numbered --steps 24; echo "rc=$?"
  echo "== per_range iteration replay"
  $G run --mode per_range --iteration-replay "Train step *" --iterations 16 --metrics $M -o "$OUT/per_range" \
    -- python3 $T --numbered --steps 16; echo "rc=$?"
} 2>&1 | tee "$OUT/log.txt"
