#!/usr/bin/env bash
# PC sampling on the GPU (issue 30, README "PC sampling: stall reasons"), on llm.c's
# train_gpt2cu built with -lineinfo and nanoGPT's train.py (public, unmodified, eager).
# Sections (SECTIONS, default "overhead invariant ncu"):
#
#   overhead   ROUNDS (2) interleaved rounds of native, `gmprof run --mode trace` and `gmprof
#              run --mode trace --pc-sampling` (CUPTI's default interval) of llm.c (LLMC_STEPS,
#              30 steps) and nanoGPT (NG_ITERS, 30 iterations); median step time after step
#              2, pooled per side: PASS when --pc-sampling is at most 1.3x native (the
#              acceptance), with trace alone beside it.                        ~5 min
#   invariant  the --pc-sampling runs of `overhead` (or fresh ones of 8 steps): report.json's
#              pc section (scripts/check/pc_check.py invariant): Σ kernels = samples, every range =
#              Σ of its reasons, = Σ of its kernels' samples (its own launches and its
#              descendants'), and at least its children, top-level ranges = every attributed
#              sample; the losses; the summary's PC lines; stalls.csv's head; the first hot
#              instructions with file:line (llm.c has -lineinfo); and one llm.c run in
#              kernel-serialized collection (GMPROF_PC_COLLECTION=serialized: exact
#              attribution by correlation id) checked the same way.            ~2 min
#   ncu        the top TOP_KERNELS (8) kernels by gmprof samples, profiled by ncu (`--metrics
#              group:smsp__pcsamp_warp_stall_reasons`, --cache-control none --clock-control
#              none, NCU_LAUNCHES (1000) launches of them, after NCU_SKIP (20)); per kernel, the
#              shares of gmprof's top three stall reasons against ncu's (summed over its
#              launches): PASS within 5 pp for at least 5 kernels, per program.  ~6 min
#   loss       llm.c for 30 steps under --pc-sampling at LOSS_CASES ("EXPONENT:SLEEP_MS:HW_MiB"
#              with def for the default): samples, drains that found the hardware buffer full,
#              and the step time; a run that lost none has the same samples as the others
#              after scaling by 2^(E-11).                                      ~2 min
#   record     the raw sample buffers of an llm.c run (GMPROF_PC_RECORD) with its report.json
#              and kernels.csv, for recorded CPU tests: $LOGS/pc-recorded.tar.xz.  ~1 min
#
# Here: scripts/gpu-stage --no-tests, and .real/ (scripts/real/stage.sh; this script uses
# .real/llmc/train_gpt2cu_lineinfo when present, else builds it from .real/llmc/src with
# -lineinfo if that is there, else falls back to train_gpt2cu and says so). There, from the
# repo root with .gpu/ and .real/ carried, e.g.
#   SECTIONS="overhead invariant" bash scripts/gpu/pc-sampling-validate.sh
#   SECTIONS="ncu record" bash scripts/gpu/pc-sampling-validate.sh
# If the drain thread misbehaves (CUPTI documents no thread rule for cuptiPCSamplingGetData),
# rerun with GMPROF_PC_DRAIN_MS=0 exported (records taken at the end, on the finishing thread).
# Lines to paste into a validation log start with "==", PASS or FAIL; logs and outputs go to
# ${LOGS:-out/pc} (a tarball of the small files at the end).
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
export PYTHONUNBUFFERED=1
out=$(mkdir -p "${LOGS:-out/pc}" && cd "${LOGS:-out/pc}" && pwd)
W=${WORK:-/tmp/gmprof-pc}
mkdir -p "$W"
want() { case " ${SECTIONS:-overhead invariant ncu} " in *" $1 "*) return 0;; esac; return 1; }
run() { echo "\$ $*" >&2; local t0=$SECONDS; timeout "${T:-300}" "$@"; local rc=$?; echo "[exit $rc, $((SECONDS - t0)) s]" >&2; return $rc; }
check() { python3 "$ROOT/scripts/check/pc_check.py" "$@"; }
echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) | $(date -u +%FT%TZ) | gmprof $("$G" --version | awk '{print $2}')"

# llm.c with line information.
LLMC_BIN=$R/llmc/train_gpt2cu_lineinfo
if [ ! -x "$LLMC_BIN" ] && [ -f "$R/llmc/src/train_gpt2.cu" ]; then
  b=$(mktemp -d) && cp -r "$R/llmc/src/." "$b" && sed -i 's/cudaMemAdvise(\*out, bytes, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' "$b/llmc/cuda_utils.cuh"
  ( cd "$b" && run nvcc --threads=0 -t=0 --use_fast_math -std=c++17 -O3 -lineinfo --generate-code 'arch=compute_90,code=[compute_90,sm_90]' \
      train_gpt2.cu -lcublas -lcublasLt -o "$W/train_gpt2cu_lineinfo" ) && LLMC_BIN=$W/train_gpt2cu_lineinfo
fi
if [ ! -x "$LLMC_BIN" ]; then
  LLMC_BIN=$R/llmc/train_gpt2cu
  echo "== llm.c WITHOUT -lineinfo ($LLMC_BIN): file:line columns stay blank"
else
  echo "== llm.c with -lineinfo: $LLMC_BIN"
fi
LLMC=("$LLMC_BIN" -i "$R/llmc/data/train.bin" -j "$R/llmc/data/val.bin" -e d12 -b 4 -t 1024 -v 1000 -s 1000)
# nanoGPT at GPT-2 small's shape (NG_SHAPE=gpt2, the default) or a small launch-bound one
# (NG_SHAPE=small: 6 layers of 384, batch 8 x 256, about 9 ms per iteration, where trace mode's
# per-launch callbacks alone cost about 1.4x).
if [ "${NG_SHAPE:-gpt2}" = small ]; then
  NG_DIMS=(--batch_size=8 --block_size=256 --n_layer=6 --n_head=6 --n_embd=384)
else
  NG_DIMS=(--batch_size=8 --block_size=1024 --n_layer=12 --n_head=12 --n_embd=768)
fi
NG=(python3 "$R/nanogpt/torch_launch.py" train.py --dataset=synthetic "${NG_DIMS[@]}" --eval_interval=1000000 --eval_iters=1 --log_interval=1 --gradient_accumulation_steps=1 --dtype=bfloat16
  --always_save_checkpoint=False --out_dir=/tmp/nanogpt-out --compile=False --dropout=0.0)
[ -f "$R/nanogpt/torch_launch.py" ] || NG[1]=$ROOT/scripts/real/torch_launch.py

# Runs program P (llmc|ng) as SIDE (native|trace|pc) into $W/P-SIDE-N, with STEPS steps.
side() {
  local p=$1 s=$2 n=$3 steps=$4 dir=$W/$1-$2-$3 cmd
  if [ "$p" = llmc ]; then cmd=("${LLMC[@]}" -x "$steps"); cd "$R/llmc"; else cmd=("${NG[@]}" --max_iters="$steps"); cd "$R/nanogpt"; fi
  local steps_flag=(); [ "$p" = ng ] && steps_flag=(--torch-steps step)
  case $s in
    native) run "${cmd[@]}" > "$dir.txt" 2>&1 ;;
    trace) run "$G" run --mode trace "${steps_flag[@]}" -o "$dir" -- "${cmd[@]}" > "$dir.txt" 2>&1 ;;
    pc) run "$G" run --mode trace --pc-sampling "${steps_flag[@]}" -o "$dir" -- "${cmd[@]}" > "$dir.txt" 2>&1 ;;
  esac
  local rc=$?
  cd "$ROOT"
  return $rc
}

if want overhead; then
  for p in llmc ng; do
    steps=${LLMC_STEPS:-30}; [ $p = ng ] && steps=${NG_ITERS:-30}
    for n in $(seq 1 "${ROUNDS:-2}"); do
      for s in native trace pc; do side $p $s $n "$steps"; done
    done
    check overhead "$p --mode trace" 1.3 "$W/$p-native-"*.txt -- "$W/$p-trace-"*.txt | sed 's/^PASS/==/; s/^FAIL/==/'
    check overhead "$p --mode trace --pc-sampling (default interval)" 1.3 "$W/$p-native-"*.txt -- "$W/$p-pc-"*.txt
    check overhead "$p: --pc-sampling against --mode trace alone" 1.3 "$W/$p-trace-"*.txt -- "$W/$p-pc-"*.txt | sed 's/^PASS/==/; s/^FAIL/==/'
    grep -h "^PC sampling:" "$W/$p-pc-1.txt" | head -1 | sed 's/^/== /'
  done
fi

if want invariant; then
  for p in llmc ng; do
    [ -f "$W/$p-pc-1/report.json" ] || side $p pc 1 8
    check invariant "$W/$p-pc-1"
    grep -h -A4 "^PC sampling:" "$W/$p-pc-1.txt" | head -5
    grep -v "^#" "$W/$p-pc-1/stalls.csv" | head -4 | cut -c1-200
    echo "== $p hottest instructions (pc_samples.csv, with file:line where known):"
    grep -v "^#" "$W/$p-pc-1/pc_samples.csv" | sort -t, -k7 -n -r | head -5 | cut -c1-240
    python3 - "$W/$p-pc-1/pc_samples.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#")))
lined = sum(int(r["samples"]) for r in rows if r["line"])
total = sum(int(r["samples"]) for r in rows) or 1
print("== %.1f %% of sampled (instruction, reason) samples have a source line" % (100.0 * lined / total))
PY
  done
  cd "$R/llmc"
  GMPROF_PC_COLLECTION=serialized run "$G" run --mode trace --pc-sampling -o "$W/llmc-serial" -- "${LLMC[@]}" -x 4 > "$W/llmc-serial.txt" 2>&1
  cd "$ROOT"
  check invariant "$W/llmc-serial"
  grep -h -A3 "^PC sampling:" "$W/llmc-serial.txt" | head -4
  # A counter mode beside PC sampling: started, or refused with a clear error (never silent).
  cd "$R/llmc"
  run "$G" run --mode per_range --pc-sampling -o "$W/llmc-per_range-pc" -- "${LLMC[@]}" -x 3 > "$W/llmc-per_range-pc.txt" 2>&1
  echo "== per_range --pc-sampling: exit $? | $(grep -h -m1 -E 'PC sampling|error' "$W/llmc-per_range-pc.txt" | cut -c1-300)"
  cd "$ROOT"
fi

if want ncu; then
  for p in ${PROGRAMS:-llmc ng}; do
    [ -f "$W/$p-pc-1/report.json" ] || side $p pc 1 8
    names=$(check top-kernels "$W/$p-pc-1" "${TOP_KERNELS:-8}" | paste -sd'|')
    if [ -z "$names" ]; then echo "FAIL $p: no kernel with PC samples"; continue; fi
    if [ $p = llmc ]; then cmd=("${LLMC[@]}" -x 6); cd "$R/llmc"; else cmd=("${NG[@]}" --max_iters=6); cd "$R/nanogpt"; fi
    # ncu counts launches over all matched kernels: nanoGPT's top kernels include a copy
    # kernel launched about 200 times per iteration, and with 200 launches llm.c's forward
    # kernels used them all before its backward ones ran (llm.c stops ncu after step 3).
    launches=${NCU_LAUNCHES:-1000}; [ $p = ng ] && launches=${NCU_LAUNCHES_NG:-1500}
    ncu_common=(--csv --print-units base --print-kernel-base mangled --kernel-name-base mangled --cache-control none
      --clock-control none -k "regex:^($names)\$" --launch-skip "${NCU_SKIP:-20}" --launch-count "$launches")
    T=480 run ncu "${ncu_common[@]}" --metrics group:smsp__pcsamp_warp_stall_reasons "${cmd[@]}" > "$W/ncu-$p.csv" 2>&1
    if ! grep -q "smsp__pcsamp_warps_issue_stalled" "$W/ncu-$p.csv"; then
      echo "== ncu's metric group was not accepted: the metrics by name"
      grep -m3 "ERR" "$W/ncu-$p.csv"
      T=480 run ncu "${ncu_common[@]}" --metrics "$(check ncu-metrics "$W/$p-pc-1")" "${cmd[@]}" > "$W/ncu-$p.csv" 2>&1
    fi
    cd "$ROOT"
    check compare "$W/$p-pc-1" "$W/ncu-$p.csv" --top "${TOP_KERNELS:-8}" --tol 5 --need 5 | tee "$out/compare-$p.txt"
  done
fi

if want loss; then
  cd "$R/llmc"
  for c in ${LOSS_CASES:-11:def:def 11:def:4096 11:10:def 13:def:def 13:10:def 15:def:def 11:5:2048}; do
    IFS=: read -r e ws hw <<<"$c"
    ( [ "$ws" != def ] && export GMPROF_PC_WORKER_SLEEP_MS=$ws; [ "$hw" != def ] && export GMPROF_PC_HW_BUFFER_MB=$hw
      run "$G" run --mode trace --pc-sampling="$e" -o "$W/loss-$e-$ws-$hw" -- "${LLMC[@]}" -x 30 > "$W/loss-$e-$ws-$hw.txt" 2>&1 )
    echo "== $c exit $? | $(grep -h 'total average iteration time' "$W/loss-$e-$ws-$hw.txt") | $(grep -ho 'PC sampling: [0-9]* samples.*full: [0-9]*' "$W/loss-$e-$ws-$hw.txt") | $(grep -h '^# pc_drains' "$W/loss-$e-$ws-$hw/stalls.csv")"
  done
  cd "$ROOT"
fi

if want record; then
  cd "$R/llmc"
  rm -rf "$W/rec" && mkdir -p "$W/rec"
  GMPROF_PC_RECORD=$W/rec/pc_capture.json run "$G" run --mode trace --pc-sampling -o "$W/rec/run" -- "${LLMC[@]}" -x 3 \
    > "$W/rec/run.txt" 2>&1
  cd "$ROOT"
  ls -la "$W/rec" "$W/rec/run" | head -20
  python3 -c "import json,sys; c=json.load(open(sys.argv[1])); print('== recorded: %d reasons, %d PC records, %d samples, %d drains' % (len(c['reasons']), len(c['records']), c['total_samples'], c['drains']))" "$W/rec/pc_capture.json"
  ( cd "$W/rec" && tar -cJf "$out/pc-recorded.tar.xz" pc_capture.json run/report.json run/kernels.csv run/ranges.csv run/stalls.csv run/pc_samples.csv run.txt )
fi

cd "$W" && tar -cJf "$out/pc-runs.tar.xz" $(ls -d *.txt *.csv */summary.txt */stalls.csv 2>/dev/null) 2>/dev/null
ls -la "$out"
