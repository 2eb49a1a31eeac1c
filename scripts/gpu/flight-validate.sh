#!/usr/bin/env bash
# The flight recorder (issue 42) through `gmprof run` on the GPU machine, trace mode: 6 000
# steps with one step 200 ms slower (examples/c/flight_slow_step.cu, `spin` at step 3 000)
# under --slow-step 3x make exactly one window, window-0/, holding step 3 000 with the spin
# kernel's row, and the steps table marks its steps; the same run without the slow step makes
# no window; --flight-signal SIGUSR1 makes a window when the signal comes. Expects the .gpu/
# of `scripts/gpu-stage --no-tests --features gpu`.
set -u
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
out=${OUT:-out/flight-validate}; rm -rf "$out"; mkdir -p "$out"
run() { echo; echo "\$ $*"; timeout "${T:-600}" "$@"; echo "[exit $?]"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
STEPS=${STEPS:-6000} SLOW=${SLOW:-3000}
run nvcc -O2 -arch=sm_90 -o /tmp/flight_slow_step examples/c/flight_slow_step.cu

run $G run --slow-step 3x -o "$out/slow" -- /tmp/flight_slow_step "$STEPS" "$SLOW"
run $G run --slow-step 3x -o "$out/steady" -- /tmp/flight_slow_step "$STEPS" -1
ls "$out/slow" "$out/slow/window-0" "$out/steady"
python3 - "$out" "$SLOW" <<'PY'
import csv, json, os, sys
out, slow = sys.argv[1], int(sys.argv[2])
for run, want in (("slow", 1), ("steady", 0)):
    r = json.load(open(f"{out}/{run}/report.json"))
    s = r["streamed"]; f = s.get("flight") or {}
    windows = f.get("windows", [])
    print(run, "| steps", s["steps"], "| windows", [(w["dir"], w["trigger_step"], w["first_step"], w["last_step"]) for w in windows])
    for w in windows: print("  ", w["triggers"])
    assert len(windows) == want, f"{run}: {len(windows)} windows, want {want}"
    dirs = sorted(d for d in os.listdir(f"{out}/{run}") if d.startswith("window-"))
    assert len(dirs) == want, dirs
w = json.load(open(f"{out}/slow/report.json"))["streamed"]["flight"]["windows"][0]
assert w["first_step"] <= slow <= w["last_step"], w
rows = [l for l in open(f"{out}/slow/window-0/kernels.csv") if not l.startswith("#")]
spin = [l for l in rows if "spin" in l]
print("window-0 kernels.csv:", len(rows) - 1, "rows,", len(spin), "spin")
assert len(spin) == 1
try:
    import pyarrow.dataset as ds
    t = ds.dataset(f"{out}/slow/steps", format="parquet").to_table(columns=["step", "flight_window"]).to_pydict()
    marked = [s for s, w in zip(t["step"], t["flight_window"]) if w is not None]
    print("steps marked:", marked)
    assert marked == list(range(w["first_step"], w["last_step"] + 1))
except ImportError:
    print("no pyarrow: steps/ not read back")
PY
run $G report "$out/slow/window-0" | head -20

# A window asked for by a signal, in a run with no rule.
$G run --flight-signal SIGUSR1 -o "$out/signal" -- /tmp/flight_slow_step 20000 -1 > "$out/signal.log" 2>&1 &
launcher=$!
sleep 20
program=$(pgrep -P "$launcher" | head -1)
echo "SIGUSR1 to $program"; [ -n "$program" ] && kill -USR1 "$program"; wait "$launcher"
python3 -c "import json,sys; f=json.load(open(sys.argv[1]))['streamed']['flight']; print('signal run windows:', [(w['dir'], w['triggers']) for w in f['windows']])" "$out/signal/report.json"
