#!/usr/bin/env bash
# PM sampling validation on the GPU machine, in one go. Run from the repo root after
# scripts/gpu-stage --features gpu, with the staged .gpu/. Writes its log to
# ${OUT:-out/pm-validate}/pm.log; results are recorded in validation/ and BENCHMARKS.md.
#   1. examples/pm_validate.rs: a memory-bound range and an MLP train_step with nested
#      ranges; DRAM bytes integrated from PM samples against per_range counters (ranges of
#      1 ms or more, within 5 %), mean throughput against bytes over time, an interval sweep,
#      nested ranges get values, and whether PM sampling runs beside per_range.
#   2. examples/train_loop.rs: trace + PM sampling against unprofiled in one process
#      (--compare), and trace alone, for the overhead; the report's PM lines.
#   3. gmprof run --pm-sampling on the same training loop (injection path).
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH=$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
out=${OUT:-out/pm-validate}; mkdir -p "$out"
B=.gpu/bin
run() { echo; echo "\$ $*"; timeout "${T:-120}" "$@"; echo "[exit $?]"; }
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  run $B/pm_validate --intervals "${INTERVALS:-5us,20us,100us}" --iterations 10 --out "$out/validate" 2>&1 | grep -v "^\s*$"
  for rep in 1 2 3; do
    run $B/train_loop --mode trace --pm-sampling default --pm-interval 20us --compare --steps 100 --warmup 3 \
        --log-every 0 --out "$out/train_pm" 2>&1 | grep -E "overhead|^\[exit|error|warning|PM"
    run $B/train_loop --mode trace --compare --steps 100 --warmup 3 --log-every 0 --out "$out/train_trace" 2>&1 |
        grep -E "overhead|^\[exit|error"
  done
  grep -E "^# (pm_|warning)" "$out/train_pm/pm.csv" | head -20
  python3 - "$out/train_pm/pm.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#"))]
for path in ("train_step", "train_step/forward", "train_step/backward", "train_step/update"):
    sel = [r for r in rows if r["scope"] == "range" and r["path"] == path and r["metric"].startswith("dram__bytes_read")]
    if sel:
        r = sel[0]
        print("train_loop pm path=%s instances=%d first: read_bytes=%s mean=%s samples=%s few=%s" %
              (path, len(sel), r["total"], r["mean"], r["samples"], r["few_samples"]))
kern = [r for r in rows if r["scope"] == "kernel" and r["metric"].startswith("dram__bytes_read")]
few = sum(1 for r in kern if r["few_samples"] == "true")
print("train_loop pm kernels=%d few_samples=%d blank=%d" % (len(kern), few, sum(1 for r in kern if r["mean"] == "")))
PY
  run $B/gmprof run --mode trace --pm-sampling default --pm-interval 50us -o "$out/run" --html "$out/run/report.html" -- \
      $B/train_loop --no-profile --steps 20 --log-every 0 2>&1 | tail -15
  ls "$out/run" 2>&1
} > "$out/pm.log" 2>&1
echo "wrote $out/pm.log"
