#!/usr/bin/env bash
# Memory over a long streamed run (issue 42): examples/c/nvtx_vector_add.cu natively and under
# `gmprof run --mode trace` with streamed outputs, side by side on one GPU, each process's RSS
# (VmRSS of the program, the injected gmprof included) sampled every 10 s; both are ended by
# SIGTERM after SECS seconds, and the time from the signal to gmprof's exit is measured.
#   (on the GPU machine, with .gpu/ of scripts/gpu-stage) SECS=180 bash scripts/gpu/stream-rss.sh
# Written 2026-11-27 when no device time was left: not yet run.
set -u
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
SECS=${SECS:-180}
out=${OUT:-out/stream-rss}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
nvcc -O2 -arch=sm_90 -o /tmp/nva examples/c/nvtx_vector_add.cu || exit 1
rm -rf /tmp/rss-run
/tmp/nva 1000000000 16 > /dev/null 2>&1 &
native=$!
GMPROF_STREAM=1 GMPROF_ROW_LIMIT=20000 $G run --mode trace -o /tmp/rss-run -- /tmp/nva 1000000000 16 > "$out/streamed.log" 2>&1 &
launcher=$!
sleep 1; prog=$(pgrep -P $launcher | head -1)
rss() { awk '/VmRSS/ {print int($2/1024)}' /proc/$1/status 2>/dev/null; }
echo "   t_s  native_MiB  streamed_MiB  parts_MiB"
for ((t = 10; t <= SECS; t += 10)); do
  sleep 10
  printf '%6d  %10s  %12s  %9s\n' $t "$(rss $native)" "$(rss $prog)" "$(du -sm /tmp/rss-run 2>/dev/null | cut -f1)"
done
kill -TERM $native
start=$(date +%s.%N); kill -TERM $prog; wait $launcher; end=$(date +%s.%N)
echo "SIGTERM to gmprof's exit: $(echo "$end - $start" | bc) s"
grep -E "^streamed:|wrote" "$out/streamed.log" | head -3
python3 - <<'PY'
import json
r = json.load(open("/tmp/rss-run/report.json"))
s = r["streamed"]
print("kernels", s["kernels"], "steps", s["steps"], "parts", [(t["table"], t["parts"], t["rows"]) for t in s["tables"]])
PY
du -sb /tmp/rss-run | awk '{print "bytes on disk:", $1}'
