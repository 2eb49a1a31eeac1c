#!/usr/bin/env bash
# A long training run under `gmprof run` (issue 42's acceptance): llm.c's GPT-2 trainer
# (train_gpt2.cu, public; scripts/real/stage.sh builds it) for SECS seconds, the program's RSS
# (VmRSS of the process gmprof is injected into) and the streamed parts' size sampled every
# 10 s, the time from the program's last step (or the signal that ends it) to gmprof's exit,
# the bytes per kernel on disk, and the consistency of the outputs: kernels in the parts =
# kernels streamed, aggregates = a recomputation from the parts, one steps row per step.
#
# Here: scripts/gpu-stage --no-tests, scripts/real/stage.sh LLMC_SRC NANOGPT_SRC. There, with
# .gpu/ and .real/ carried:
#   MODE=trace SECS=540 bash scripts/gpu/long-run.sh
# Two at once on a 2-GPU machine: CUDA_VISIBLE_DEVICES=0 MODE=trace ... & CUDA_VISIBLE_DEVICES=1
# MODE=per_range ... (each finds its own program by its process id).
# LOG_FILTER: GMPROF_LOG for gmprof's runs (default gmprof=info; adding gmprof::census=debug
# logs a memory census per drain). MODE: native | trace | per_range | pm (trace with
# --pm-sampling auto). END: steps (llm.c runs
# STEPS steps and ends by itself; SECS+40 s is a guard) or term (SIGTERM to the program after
# SECS s) or kill (SIGKILL after SECS s: the parts closed by then must read back).
# Logs in ${OUT:-out/long}/MODE-END/, the run's outputs in ${RUNS:-/tmp/long-runs}/MODE-END/.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
MODE=${MODE:-trace} SECS=${SECS:-540} END=${END:-term}
out=$(mkdir -p "${OUT:-out/long}" && cd "${OUT:-out/long}" && pwd)/$MODE-$END
rm -rf "$out"; mkdir -p "$out"
# The run's outputs (hundreds of MB) go apart from the logs: RUNS, default /tmp/long-runs.
runs=${RUNS:-/tmp/long-runs}/$MODE-$END; rm -rf "$runs"; mkdir -p "$(dirname "$runs")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
echo "MODE=$MODE SECS=$SECS END=$END STEPS=${STEPS:-}"
steps=${STEPS:-1000000}
[ "$END" = steps ] || steps=1000000
# llm.c: GPT-2 124M (d12) from scratch, B=4, T=1024; validation and sampling every 1000 steps
# (its ranges: "Train step N" and per layer below it; eval steps differ from train steps).
LLMC=(stdbuf -oL "$R/llmc/train_gpt2cu" -i "$R/llmc/data/train.bin" -j "$R/llmc/data/val.bin" -e d12 -b 4 -t 1024
  -v 1000 -s 1000 -x "$steps")
case $MODE in
  native) cmd=("${LLMC[@]}") ;;
  trace) cmd=(env GMPROF_LOG="${LOG_FILTER:-gmprof=info}" "$G" run --mode trace -o "$runs" -- "${LLMC[@]}") ;;
  per_range) cmd=(env GMPROF_LOG="${LOG_FILTER:-gmprof=info}" GMPROF_STREAM=1 "$G" run --mode per_range -o "$runs" -- "${LLMC[@]}") ;;
  pm) cmd=(env GMPROF_LOG="${LOG_FILTER:-gmprof=info}" "$G" run --mode trace --pm-sampling default --pm-interval "${PM_INTERVAL:-auto}" -o "$runs" -- "${LLMC[@]}") ;;
  # Nsight Systems on the same program, CUDA and NVTX traced (the CUPTI cost any tracer pays).
  nsys) mkdir -p "$runs"; cmd=("${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}" profile -t cuda,nvtx -s none
    --cpuctxsw=none -f true -o "$runs/llmc" "${LLMC[@]}") ;;
  *) echo "MODE: native, trace, per_range, pm or nsys" >&2; exit 2 ;;
esac
cd "$R/llmc"
start=$(date +%s.%N)
# Each step line gets the time it was read (llm.c's stdout is line-buffered by stdbuf).
( "${cmd[@]}" 2> "$out/stderr.txt" & echo $! > "$out/pid"; wait ) | python3 -u -c '
import sys, time
for line in sys.stdin:
    print(f"{time.time():.3f} {line}", end="", flush=True)' > "$out/stdout.txt" &
pipe=$!
sleep 2
# The program: the command itself (native; stdbuf execs it), or gmprof run's child.
launcher=$(cat "$out/pid")
if [ "$MODE" = native ]; then prog=$launcher; else prog=$(pgrep -P "$launcher" | head -1); fi
# nsys runs the program under a process of its own: the program is the one named train_gpt2cu.
[ "$MODE" = nsys ] && { sleep 3; prog=$(pgrep -n -f "^$R/llmc/train_gpt2cu" || echo "$prog"); }
[ -n "$prog" ] || { echo "the program did not start"; cat "$out/stderr.txt"; exit 1; }
sub() { python3 -c "print(f'{$1 - $2:.2f}')"; }  # no bc on the GPU machine
rss() { awk '/VmRSS/ {printf "%d", $2/1024}' "/proc/$1/status" 2>/dev/null; }
hwm() { awk '/VmHWM/ {printf "%d", $2/1024}' "/proc/$1/status" 2>/dev/null; }
laststep() { grep -oE '^[0-9.]+ step +[0-9]+' "$out/stdout.txt" | tail -1 | awk '{print $3}'; }
echo "   t_s  program_RSS_MiB  parts_MiB   step" | tee "$out/rss.txt"
guard=$SECS; [ "$END" = steps ] && guard=$((SECS + 40))
t=0
while kill -0 "$prog" 2>/dev/null && [ $t -lt "$guard" ]; do
  # A sample every 10 s, the program watched every 0.1 s: its exit is timed to 0.1 s (a plain
  # `sleep 10` here put up to 10 s of sleep into the exit times measured before).
  for _ in $(seq 100); do kill -0 "$prog" 2>/dev/null || break; sleep 0.1; done
  t=$((t + 10))
  kill -0 "$prog" 2>/dev/null || break
  printf '%6d  %15s  %9s  %6s\n' $t "$(rss "$prog")" "$(du -sm "$runs" 2>/dev/null | cut -f1)" "$(laststep)" | tee -a "$out/rss.txt"
done
echo "peak RSS (VmHWM) $(hwm "$prog") MiB"
signal=""
if kill -0 "$prog" 2>/dev/null; then
  case $END in kill) signal=KILL ;; *) signal=TERM ;; esac
  signal_at=$(date +%s.%N)
  echo "SIG$signal to the program at $(sub "$signal_at" "$start") s"
  kill -"$signal" "$prog"
fi
# The program's own exit (its exit handlers: gmprof's finish, then CUDA's and CUPTI's
# teardown), apart from gmprof run's after it (reading the outputs back, the summary).
while kill -0 "$prog" 2>/dev/null; do sleep 0.05; done
prog_end=$(date +%s.%N)
wait $pipe
end=$(date +%s.%N)
last=$(grep -E '^[0-9.]+ step +[0-9]+' "$out/stdout.txt" | tail -1 | awk '{print $1}')
echo "wall $(sub "$end" "$start") s; last step line to gmprof's exit: $(sub "$end" "${last:-$end}") s"
echo "last step line to the program's exit: $(sub "$prog_end" "${last:-$prog_end}") s; then gmprof run's own: $(sub "$end" "$prog_end") s"
[ -n "$signal" ] && echo "signal to gmprof's exit: $(sub "$end" "$signal_at") s"
grep -E '^[0-9.]+ step +[0-9]+' "$out/stdout.txt" | tail -2 | cut -c1-150
python3 - "$out/stdout.txt" <<'PY'
import re, statistics, sys
ms = [float(m.group(1)) for l in open(sys.argv[1]) if (m := re.search(r"\| ([0-9.]+) ms \|", l))]
steady = ms[10:]
if steady:
    steady.sort()
    q = lambda p: steady[min(len(steady) - 1, int(p * len(steady)))]
    print(f"llm.c step time over {len(steady)} steps (first 10 left out): median {q(0.5):.3f} ms, p90 {q(0.9):.3f}, p99 {q(0.99):.3f}, max {steady[-1]:.3f}")
PY
[ "$MODE" = native ] || [ "$MODE" = nsys ] && exit 0
# CHECK=later: the outputs are checked by scripts/gpu/long-runs-check.sh in a later call (a
# 9-minute run and its checks do not fit one 10-minute call of the GPU machine).
if [ "${CHECK:-now}" = later ]; then
  sed -n '/gmprof 0\./,$p' "$out/stderr.txt" | head -40
  du -sb "$runs" | awk '{print "bytes on disk, all outputs:", $1}'
  echo "checks: later ($runs, $out)"
  exit 0
fi
# The summary (gmprof run prints it on stderr; stdout's lines carry their read time).
sed -n '/gmprof 0\./,$p' "$out/stderr.txt" | head -40
grep -c "" "$out/stderr.txt" | awk '{print "stderr lines:", $1}'; grep -iE "warn|error" "$out/stderr.txt" | head -10
grep "gmprof: finish:" "$out/stderr.txt" | tail -5  # where the exit's time goes
du -sb "$runs" | awk '{print "bytes on disk, all outputs:", $1}'
ls "$runs"
cd "$ROOT"
python3 scripts/check/long_run_check.py "$runs" "$out/stdout.txt" | tee "$out/check.txt"
$G report "$runs" > "$out/report.txt" 2>&1; echo "gmprof report: exit $?, $(wc -l < "$out/report.txt") lines"; head -5 "$out/report.txt"
