#!/usr/bin/env bash
# On-demand capture on the GPU (README "On-demand capture"), on nanoGPT's train.py (public,
# unmodified; steps from --torch-steps). Sections (SECTIONS, default "overhead captures"):
#
#   overhead  idle cost: ROUNDS (3) interleaved pairs (ABBA) of native and `gmprof run
#             --on-demand --torch-steps` runs of OVERHEAD_ITERS (60) eager iterations (about
#             0.64 s each on an H100: 40 micro-steps per iteration); the
#             median iteration time of each side (iterations >= 10, all runs pooled), the
#             per-run medians and the ratio against the 1.005 limit. The on-demand runs must
#             have taken no capture.                                       ~6 min, one GPU
#   captures  one training of at least CAPTURE_SECS (130) s under --on-demand; from another
#             shell (this script) three `gmprof capture DIR --steps N` (N = CAPTURE_STEPS, 5):
#             trace, per_kernel, per_range; then SIGTERM. Each capture-K must hold exactly N
#             step ranges, 0 flagged rows, no dropped record (scripts/check/check_capture.py); the
#             trace capture's trace.json must pass gmprof check-trace.     ~3 min, one GPU
#   ranges    a small torch program (matmul steps in an NVTX range "step"): --capture-range
#             cudaProfilerApi (repeat; per_kernel; two captures of 5 steps), --capture-range
#             nvtx:profile (5 steps), Python's `with gmprof.capture(mode="per_range")` under
#             --on-demand (3 steps), SIGUSR2 (--capture-steps 3), a capture cut by SIGTERM
#             (written, ended by the signal) and one cut by SIGKILL (its last checkpoint).
#                                                                          ~2 min, one GPU
#   ddp       torchrun, 2 ranks (needs 2 GPUs: kind nvidia-h100-x2/h200-x2), DDP nanoGPT
#             under --on-demand; one `gmprof capture DIR --steps 3`; both ranks' step numbers
#             (must be equal), `gmprof merge DIR/capture-1`.               ~2 min, two GPUs
#
# Here: scripts/gpu-stage --no-tests, and .real/ from scripts/real/stage.sh. There, from the
# repo root with .gpu/ and .real/ carried, e.g.
#   SECTIONS="overhead captures" bash scripts/gpu/on-demand-validate.sh
#   SECTIONS=ranges bash scripts/gpu/on-demand-validate.sh
#   SECTIONS=ddp bash scripts/gpu/on-demand-validate.sh            (on two GPUs)
# Lines to paste into a validation log start with "==", PASS or FAIL; logs and outputs go to
# ${LOGS:-out/on-demand} (a tarball of the small files at the end).
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
export PYTHONUNBUFFERED=1
out=$(mkdir -p "${LOGS:-out/on-demand}" && cd "${LOGS:-out/on-demand}" && pwd)
W=${WORK:-/tmp/gmprof-on-demand}
rm -rf "$W" && mkdir -p "$W"
want() { case " ${SECTIONS:-overhead captures} " in *" $1 "*) return 0;; esac; return 1; }
run() { echo "\$ $*" >&2; local t0=$SECONDS; timeout "${T:-300}" "$@"; local rc=$?; echo "[exit $rc, $((SECONDS - t0)) s]" >&2; return $rc; }
echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x $(nvidia-smi -L | wc -l) | $(date -u +%FT%TZ) | gmprof $("$G" --version | awk '{print $2}')"

# nanoGPT, eager (no compile time in the timed runs), a 6-layer GPT on random tokens.
NG_ARGS=(train.py --dataset=synthetic --batch_size=8 --block_size=256 --n_layer=6 --n_head=6 --n_embd=384
  --eval_interval=1000000 --eval_iters=1 --log_interval=1 --dtype=bfloat16 --always_save_checkpoint=False
  --out_dir=/tmp/nanogpt-out --compile=False)

# Waits until `gmprof capture DIR --status` lists PROCS processes, each past step MIN.
wait_ready() {
  local dir=$1 procs=$2 min=$3 t0=$SECONDS status
  while [ $((SECONDS - t0)) -lt "${4:-240}" ]; do
    if status=$("$G" capture "$dir" --status 2>/dev/null); then
      local n lowest
      n=$(grep -c "next step" <<<"$status")
      lowest=$(grep -o "next step [0-9]*" <<<"$status" | awk '{print $3}' | sort -n | head -1)
      if [ "$n" -ge "$procs" ] && [ "${lowest:-0}" -ge "$min" ]; then echo "$status"; return 0; fi
    fi
    sleep 2
  done
  echo "FAIL  $dir: not ready after ${4:-240} s"; return 1
}

# The median iteration time of nanoGPT logs (iterations >= 10).
iter_medians() {
  python3 - "$@" <<'PY'
import re, statistics, sys
label, files = sys.argv[1], sys.argv[2:]
runs = []
for f in files:
    times = [float(m.group(2)) for m in re.finditer(r"iter (\d+): loss [0-9.]+, time ([0-9.]+)ms", open(f).read())
             if int(m.group(1)) >= 10]
    runs.append(times)
pooled = [t for r in runs for t in r]
print("%s %.4f %s %d" % (label, statistics.median(pooled) if pooled else float("nan"),
                         ",".join("%.3f" % statistics.median(r) if r else "nan" for r in runs), len(pooled)))
PY
}

if want overhead; then
  ITERS=${OVERHEAD_ITERS:-60}
  cd "$R/nanogpt"
  # One warm-up run (caches, clocks), not counted.
  run python3 torch_launch.py "${NG_ARGS[@]}" --max_iters=30 > "$W/oh-warmup.txt" 2>&1
  for r in $(seq "${ROUNDS:-3}"); do
    for side in $( [ $((r % 2)) = 1 ] && echo "native ondemand" || echo "ondemand native" ); do
      if [ "$side" = native ]; then
        run python3 torch_launch.py "${NG_ARGS[@]}" --max_iters="$ITERS" > "$W/oh-native-$r.txt" 2>&1
      else
        run "$G" run --on-demand --torch-steps -o "$W/oh-od-$r" -- python3 torch_launch.py "${NG_ARGS[@]}" \
          --max_iters="$ITERS" > "$W/oh-ondemand-$r.txt" 2>&1
      fi
    done
  done
  cd "$ROOT"
  native=$(iter_medians native "$W"/oh-native-*.txt)
  ondemand=$(iter_medians ondemand "$W"/oh-ondemand-*.txt)
  python3 - "$native" "$ondemand" <<'PY'
import sys
(_, n, nruns, nn), (_, o, oruns, on) = (a.split() for a in sys.argv[1:3])
ratio = float(o) / float(n)
print("== overhead: native median %s ms (per run %s; %s iterations), on-demand idle median %s ms (per run %s; %s iterations)"
      % (n, nruns, nn, o, oruns, on))
print("%-5s overhead: on-demand / native = %.4f (limit 1.005)" % ("PASS" if ratio <= 1.005 else "FAIL", ratio))
PY
  idle_caps=$(find "$W" -maxdepth 2 -name 'capture-*' -path '*oh-od-*' | wc -l)
  echo "$( [ "$idle_caps" = 0 ] && echo PASS || echo FAIL)  overhead: $idle_caps capture directories in the idle runs (none asked for)"
  grep -h "on demand, idle" "$W"/oh-ondemand-1.txt | head -1
fi

if want captures; then
  N=${CAPTURE_STEPS:-5}
  D=$W/cap
  cd "$R/nanogpt"
  "$G" run --on-demand --torch-steps -o "$D" -- python3 torch_launch.py "${NG_ARGS[@]}" --max_iters=10000000 \
    > "$W/cap-run.txt" 2>&1 &
  gp=$!; t0=$SECONDS
  cd "$ROOT"
  if wait_ready "$D" 1 20; then
    k=0
    for mode in trace per_kernel per_range; do
      k=$((k + 1))
      run "$G" capture "$D" --steps "$N" --mode "$mode" > "$W/cap-$mode.txt" 2>&1
      echo "== capture $k ($mode): $(grep -E "^gmprof: (rank|pid)" "$W/cap-$mode.txt" | sed 's/^gmprof: //' | head -2 | tr '\n' ' ')"
      grep -E "error" "$W/cap-$mode.txt" | head -3
    done
    "$G" capture "$D" --status | sed 's/^/== status after: /'
  fi
  left=$((${CAPTURE_SECS:-130} - (SECONDS - t0)))
  [ "$left" -gt 0 ] && sleep "$left"
  kill -TERM "$gp"; wait "$gp"; echo "== captures: training ran $((SECONDS - t0)) s under --on-demand, gmprof run exited $? after SIGTERM"
  grep -E "^gmprof: capture [0-9]+:" "$W/cap-run.txt" | tail -6
  python3 scripts/check/check_capture.py "$D"/capture-{1,2,3} --steps "$N"
  for f in "$D"/capture-1/*/trace.json; do "$G" check-trace "$f" | tail -1; done
  # The iteration times around the captures: steady before, during (counter modes cost), after.
  python3 - "$W/cap-run.txt" <<'PY'
import re, statistics, sys
t = [float(m.group(1)) for m in re.finditer(r"iter \d+: loss [0-9.]+, time ([0-9.]+)ms", open(sys.argv[1]).read())]
if t:
    print("== captures: %d iterations, median %.2f ms, slowest %.2f ms" % (len(t), statistics.median(t[10:] or t), max(t[10:] or t)))
PY
fi

if want ranges; then
  cat > "$W/ranges.py" <<'PY'
import os, signal, sys, time
import torch

mode = sys.argv[1]
x = torch.randn(2048, 2048, device="cuda")


def step():
    torch.cuda.nvtx.range_push("step")
    for _ in range(4):
        x @ x
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


if mode == "api":
    for i in range(30):
        if i in (5, 20):
            torch.cuda.profiler.start()
        step()
        if i in (9, 24):
            torch.cuda.profiler.stop()
        # A start while the last capture is still being written is not a capture of its own:
        # the ranges are a second apart, as a program's would be.
        time.sleep(0.1)
elif mode == "nvtx":
    for i in range(30):
        if i == 10:
            torch.cuda.nvtx.range_push("profile")
        step()
        if i == 14:
            torch.cuda.nvtx.range_pop()
elif mode == "python":
    import gmprof
    for i in range(12):
        if i == 3:
            with gmprof.capture(mode="per_range") as c:
                for _ in range(3):
                    step()
            print("gmprof.capture wrote", c.output_dir, flush=True)
        step()
elif mode in ("signal", "sigterm", "sigkill"):
    for i in range(10_000):
        if i == 5:
            os.kill(os.getpid(), signal.SIGUSR2)
        if mode == "sigterm" and i == 25:
            os.kill(os.getpid(), signal.SIGTERM)
        if mode == "sigkill" and i == 5 + 300:
            os.kill(os.getpid(), signal.SIGKILL)
        step()
        time.sleep(0.01)
        if mode == "signal" and i == 40:
            break
PY
  run "$G" run --capture-range cudaProfilerApi --capture-range-end repeat --step-range step --mode per_kernel \
    -o "$W/r-api" -- python3 "$W/ranges.py" api > "$W/r-api.txt" 2>&1
  python3 scripts/check/check_capture.py "$W"/r-api/capture-{1,2} --steps 5
  run "$G" run --capture-range nvtx:profile --step-range step --mode trace -o "$W/r-nvtx" -- python3 "$W/ranges.py" nvtx \
    > "$W/r-nvtx.txt" 2>&1
  python3 scripts/check/check_capture.py "$W/r-nvtx/capture-1" --steps 5
  ls -d "$W"/r-nvtx/capture-2 2>/dev/null && echo "FAIL  nvtx:profile captured more than the first range (stop)"
  run "$G" run --on-demand --step-range step -o "$W/r-py" -- python3 "$W/ranges.py" python > "$W/r-py.txt" 2>&1
  grep "gmprof.capture wrote" "$W/r-py.txt"
  python3 scripts/check/check_capture.py "$W/r-py/capture-1" --steps 3
  run "$G" run --on-demand --step-range step --capture-steps 3 -o "$W/r-sig" -- python3 "$W/ranges.py" signal \
    > "$W/r-sig.txt" 2>&1
  python3 scripts/check/check_capture.py "$W/r-sig/capture-1" --steps 3
  run "$G" run --on-demand --step-range step --capture-steps 1000 -o "$W/r-term" -- python3 "$W/ranges.py" sigterm \
    > "$W/r-term.txt" 2>&1
  python3 scripts/check/check_capture.py "$W/r-term/capture-1"
  GMPROF_CHECKPOINT_SECS=1 run "$G" run --on-demand --step-range step --capture-steps 1000 -o "$W/r-kill" -- \
    python3 "$W/ranges.py" sigkill > "$W/r-kill.txt" 2>&1
  python3 - "$W/r-kill/capture-1" <<'PY'
import json, os, sys
d = [os.path.join(sys.argv[1], p) for p in sorted(os.listdir(sys.argv[1]))]
ok = False
for p in d:
    try:
        meta = json.load(open(os.path.join(p, "report.json")))["meta"]
    except OSError as e:
        print("FAIL  SIGKILL: %s: %s" % (p, e)); continue
    end = meta.get("run_end") or {}
    ok = end.get("kind") == "checkpoint" and meta.get("flagged_kernel_rows") == 0
    print("%-5s SIGKILL during a capture: %s holds its last checkpoint (run_end %s, %d kernels, %d flagged)"
          % ("PASS" if ok else "FAIL", os.path.basename(p), end.get("kind"), meta.get("kernel_count", 0),
             meta.get("flagged_kernel_rows", 0)))
if not d:
    print("FAIL  SIGKILL: no capture directory")
PY
fi

if want ddp; then
  D=$W/ddp
  cd "$R/nanogpt"
  "$G" run --on-demand --torch-steps -o "$D" -- python3 -m torch.distributed.run --standalone --nproc_per_node=2 \
    "${NG_ARGS[@]}" --gradient_accumulation_steps=2 --max_iters=10000000 > "$W/ddp-run.txt" 2>&1 &
  gp=$!; t0=$SECONDS
  cd "$ROOT"
  if wait_ready "$D" 2 10; then
    run "$G" capture "$D" --steps 3 > "$W/ddp-capture.txt" 2>&1
    sed 's/^/== /' "$W/ddp-capture.txt" | grep -E "rank|capture 1" | head -4
    python3 scripts/check/check_capture.py "$D/capture-1" --steps 3
    run "$G" merge "$D/capture-1" > "$W/ddp-merge.txt" 2>&1
    head -4 "$W/ddp-merge.txt"; grep -E "^gmprof: wrote" "$W/ddp-merge.txt" | cut -c1-200
    python3 - "$D/capture-1" <<'PY'
import csv, os, sys
rows = list(csv.DictReader(l for l in open(os.path.join(sys.argv[1], "stragglers.csv")) if not l.startswith("#")))
print("== ddp merge: stragglers.csv has %d step(s): %s" % (len(rows), [r["step"] for r in rows]))
PY
  fi
  kill -TERM "$gp"; wait "$gp"; echo "== ddp: gmprof run exited $? after SIGTERM, $((SECONDS - t0)) s"
fi

cd "$W" && tar -czf "$out/on-demand.tgz" --exclude='*.parquet' --exclude='trace.json' . 2>/dev/null
cp "$W"/*.txt "$out"/ 2>/dev/null
echo "logs and outputs in $out"
