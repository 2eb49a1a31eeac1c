#!/usr/bin/env bash
# Streamed outputs (issue 42) through `gmprof run` on the GPU machine, trace mode: a run past
# GMPROF_ROW_LIMIT against the same run with streaming off (same kernel count, part files
# instead of whole-file tables, peak RSS), a run below the limit (the same files as with
# streaming off), and a run SIGKILLed mid-way (every part file complete: Parquet's footer
# magic). Expects the .gpu/ of `scripts/gpu-stage --no-tests --features gpu`.
set -u
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
out=${OUT:-out/stream-validate}; rm -rf "$out"; mkdir -p "$out"
run() { echo; echo "\$ $*"; timeout "${T:-300}" "$@"; echo "[exit $?]"; }
# Peak RSS and wall time of a command, when GNU time is there.
TIMEV=(); [ -x /usr/bin/time ] && TIMEV=(/usr/bin/time -f "peak RSS %M KiB, %e s")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
STEPS=${STEPS:-100000} LIMIT=${LIMIT:-20000}
run nvcc -O2 -arch=sm_90 -o /tmp/nvtx_vector_add examples/c/nvtx_vector_add.cu

run "${TIMEV[@]}" $G run --mode trace -o "$out/whole" -- /tmp/nvtx_vector_add "$STEPS" 16
GMPROF_STREAM=1 GMPROF_ROW_LIMIT=$LIMIT GMPROF_STREAM_SECS=1 \
  run "${TIMEV[@]}" $G run --mode trace -o "$out/streamed" -- /tmp/nvtx_vector_add "$STEPS" 16
ls "$out/whole" "$out/streamed"; ls "$out/streamed/kernels" | head
python3 - "$out" <<'PY'
import json, sys, csv
out = sys.argv[1]
whole = json.load(open(f"{out}/whole/report.json"))
streamed = json.load(open(f"{out}/streamed/report.json"))
s = streamed.get("streamed")
print("whole kernels:", len(whole["kernels"]), "| streamed:", s and s["kernels"], "parts:", s and s["tables"])
print("streamed steps:", s and s["steps"], s and s["step_group"], "| kernel_count", streamed["meta"]["kernel_count"])
print("warnings:", streamed["meta"]["warnings"][:5])
assert s and s["kernels"] == len(whole["kernels"]), "kernels streamed != kernels of the whole-file run"
try:
    import pyarrow.dataset as ds
    t = ds.dataset(f"{out}/streamed/kernels", format="parquet").to_table(columns=["kernel_name", "duration_ns"])
    print("parts read back:", t.num_rows, "rows")
    assert t.num_rows == s["kernels"]
except ImportError:
    print("no pyarrow: parts not read back")
PY
run $G report "$out/streamed" | head -40

# Below the limit: the same files as with streaming off.
run $G run --mode trace -o "$out/small-off" -- /tmp/nvtx_vector_add 50 16
GMPROF_STREAM=1 GMPROF_ROW_LIMIT=$LIMIT run $G run --mode trace -o "$out/small-on" -- /tmp/nvtx_vector_add 50 16
diff <(cd "$out/small-off" && ls -R) <(cd "$out/small-on" && ls -R) && echo "below the limit: same files"

# SIGKILL mid-run: every part-*.parquet ends with Parquet's footer magic.
GMPROF_STREAM=1 GMPROF_ROW_LIMIT=$LIMIT GMPROF_STREAM_SECS=1 GMPROF_CHECKPOINT_SECS=2 \
  $G run --mode trace -o "$out/killed" -- /tmp/nvtx_vector_add 100000000 16 > "$out/killed.log" 2>&1 &
launcher=$!
sleep 20
program=$(pgrep -P "$launcher" | head -1) # the program gmprof run started
echo "SIGKILL to $program"; [ -n "$program" ] && kill -9 "$program"; wait "$launcher"
bad=0; n=0
for f in "$out"/killed/*/part-*.parquet "$out"/killed/part-*.parquet; do
  [ -f "$f" ] || continue; n=$((n+1))
  [ "$(tail -c 4 "$f")" = PAR1 ] || { echo "incomplete: $f"; bad=$((bad+1)); }
done
find "$out/killed" -maxdepth 2 | head -30
echo "killed run: $n part files, $bad incomplete"
