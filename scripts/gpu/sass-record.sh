#!/usr/bin/env bash
# Records the SASS metrics flushes of bench/sass_metrics_floor.cu's kernels for the CPU tests
# (tests/data/sass/h100_flushes.jsonl.zst, tests/sass_metrics.rs) and prints what gmprof counted.
# Needs .gpu/ (scripts/gpu-stage --no-tests); writes $OUT/sass_flushes.jsonl.
set -u
export CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
W=/tmp/sassrec; mkdir -p $W; G=$PWD/.gpu/bin/gmprof; out=${OUT:-out/sass}; mkdir -p $out
nvcc -O2 -std=c++17 -arch=sm_90 -lineinfo -o $W/smf bench/sass_metrics_floor.cu -I$CUDA_HOME/extras/CUPTI/include \
  -L$CUDA_HOME/extras/CUPTI/lib64 -lcupti -lcuda -lcublas 2>&1 | grep error
rm -f $out/sass_flushes.jsonl
GMPROF_PROBE_SASS_DUMP=$out/sass_flushes.jsonl $G run --mode trace --probe exec_count,gmem_bytes --probe-sass always \
  -o $W/run -- $W/smf plain 2>&1 | grep -E "SASS|probes"
python3 - $W/run/probes.csv <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["correlation_id"] and int(r["correlation_id"]) < 20:
        print(r["correlation_id"], r["kernel"][:40], r["probe"], r["field"], r["total"])
PY
