#!/usr/bin/env bash
# CUPTI's SASS metrics and CUDA graphs, with none of gmprof's code (issue 43): does a flush
# after graph launches return, and do the counts per function equal the eager launches' and
# ncu's per node? Builds bench/sass_metrics_floor.cu and runs its SMF_GRAPH phase in each
# capture mode, then the same program under ncu --graph-profiling node.
#   (on the GPU machine) OUT=DIR bash scripts/gpu/sass-graph-experiment.sh
set -u
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
out=${OUT:-out/sass-graph}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/smf bench/sass_metrics_floor.cu \
  -I$CUDA_HOME/extras/CUPTI/include -L$CUDA_HOME/extras/CUPTI/lib64 -lcupti -lcuda -lcublas || exit 1
for mode in global relaxed thread_local; do
  echo "== SASS metrics, graph captured in $mode mode"
  # Serialized kernel records beside the collection, as gmprof runs it: with CONCURRENT_KERNEL
  # records every value is 0, and with no kernel records nothing is patched.
  SMF_SERIAL=1 SMF_GRAPH=3 SMF_CAPTURE_MODE=$mode timeout 120 /tmp/smf run smsp__sass_inst_executed,smsp__sass_thread_inst_executed
  echo "[exit $?]"
done
echo "== ncu --graph-profiling node (plain)"
SMF_GRAPH=1 timeout 300 ncu --graph-profiling node --cache-control none --clock-control none \
  --metrics smsp__sass_inst_executed.sum,smsp__sass_thread_inst_executed.sum --csv /tmp/smf plain > "$out/ncu.csv" 2> "$out/ncu.err"
echo "[exit $?]"
python3 - "$out/ncu.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
ki, mi, vi = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
for r in rows[1:]:
    print(f"  {r[0]:>3} {r[ki][:60]:60} {r[mi]:36} {r[vi]}")
PY
