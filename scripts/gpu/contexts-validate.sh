#!/usr/bin/env bash
# Two CUDA contexts in one process: examples/c/two_contexts.cu (the primary context, then one
# the program creates, on one GPU) under gmprof run in trace and per_kernel mode. Every
# context is profiled (src/ways_in/contexts.rs): the summary's GPUs line has both, the report
# all 160 kernels, and nothing is NOT PROFILED. (Before one profiler per context, the second
# context was named NOT PROFILED with its 80 launches: validation/2026-11-25-contexts-h100.log.)
#
#   scripts/gpu-stage --no-tests && (on the GPU machine) bash scripts/gpu/contexts-validate.sh
set -u
ROOT=$PWD
G=$ROOT/.gpu/bin/gmprof
work=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
/usr/local/cuda/bin/nvcc -o "$work/two_contexts" examples/c/two_contexts.cu -lcuda || exit 1
"$work/two_contexts" 40
for mode in trace per_kernel; do
  echo; echo "\$ gmprof run --mode $mode -o out -- two_contexts 40"
  "$G" run --mode "$mode" -o "$work/$mode" -- "$work/two_contexts" 40 2>&1 | sed -n '1,3p;/NOT PROFILED/p;/^GPUs/p;/^gmprof:/p'
  python3 - "$work/$mode" <<'PY'
import json, sys
d = sys.argv[1]
status = json.load(open(d + "/injection.json"))
report = json.load(open(d + "/report.json"))
print("injection.json contexts_created:", status["contexts_created"], "contexts_profiled:", status.get("contexts_profiled"), "unprofiled_contexts:", status.get("unprofiled_contexts"))
print("report.json kernels:", len(report["kernels"]), "devices:", [(d["device_id"], d["context_id"], d["kernel_count"]) for d in report["meta"].get("devices", [])], "unprofiled_contexts:", report["meta"].get("unprofiled_contexts"))
PY
done
