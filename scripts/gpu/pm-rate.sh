#!/usr/bin/env bash
# How fast PM sampling drains on a real program (issue 29): llm.c's GPT-2 (d12, B=8, T=1024)
# under `gmprof run --mode trace --pm-sampling` at short intervals, with the decode thread's
# log line (GMPROF_LOG=gmprof=info: decode, hand-off and evaluation time per sample, and
# the number of evaluation threads) and the PM header lines of pm.csv (samples, overflows,
# missing samples). Cases (CASES, default below) are "INTERVAL:THREADS:METRICS" with
# METRICS `default` or `dram` (the two DRAM throughput metrics alone).
# SECTIONS (default "rate"): rate (the cases above), ncu (issue 29's acceptance: llm.c for
# NCU_STEPS (20) steps under PM sampling with NCU_METRICS (dram) at NCU_INTERVAL (20us) (or
# nanoGPT's GPT-2 small with NCU_PROGRAM=ng), and
# under ncu --cache-control none --clock-control none --metrics dram__bytes_read.sum, paired
# per kernel in launch order by scripts/check/pm_vs_ncu.py; about 7 minutes). llm.c calls
# cudaProfilerStop after step 3, so ncu profiles step 0 (with its validation) to step 3: the
# first 4 960 kernels, which are paired with gmprof's first.
# floor: CUPTI's calls alone (examples/pm_decode_floor.rs: decode, sample times, evaluation
# and re-initialization per sample on one plain loop, the GPU kept busy by the validation
# MLP) for FLOOR_CASES ("METRICS:INTERVAL", default below), 5 s each; about 1 minute.
# Here: scripts/gpu-stage --no-tests and scripts/real/stage.sh. There, from the repo root,
# with .gpu/ and .real/ carried:  STEPS=150 bash scripts/gpu/pm-rate.sh
# Logs go to ${LOGS:-out/pm-rate}.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
out=$(mkdir -p "${LOGS:-out/pm-rate}" && cd "${LOGS:-out/pm-rate}" && pwd)
LLMC=("$R/llmc/train_gpt2cu" -i "$R/llmc/data/train.bin" -j "$R/llmc/data/val.bin" -e d12 -b 8 -t 1024 -v 100000 -s 100000)
DRAM=dram__bytes_read.sum.per_second,dram__bytes_write.sum.per_second
echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) | $(date -u +%FT%TZ) | $(nproc) CPUs | gmprof $("$G" --version | awk '{print $2}')"
want() { case " ${SECTIONS:-rate} " in *" $1 "*) return 0;; esac; return 1; }
cd "$R/llmc"
if want rate; then
/usr/bin/time -f "%e s" "${LLMC[@]}" -x "${STEPS:-150}" > "$out/native.txt" 2>&1
echo "== native: $(grep -E 'total average iteration time' "$out/native.txt") ($(tail -1 "$out/native.txt"))"
for case in ${CASES:-20us:1:default 20us:4:default 10us:4:default 20us:4:dram}; do
  IFS=: read -r interval threads metrics <<<"$case"
  m=$metrics; [ "$m" = dram ] && m=$DRAM
  d="$out/run-$interval-$threads-$metrics"
  GMPROF_LOG=gmprof=info GMPROF_PM_EVAL_THREADS=$threads timeout -k 5 "${T:-120}" /usr/bin/time -f "%e s" "$G" run --mode trace \
    --pm-sampling "$m" --pm-interval "$interval" -o "$d" -- "${LLMC[@]}" -x "${STEPS:-150}" > "$d.txt" 2>&1
  echo "== $interval, $threads evaluation thread(s), $metrics metrics: exit $? | $(grep -E 'total average iteration time' "$d.txt") | $(tail -1 "$d.txt")"
  grep -ho "PM sampling: [0-9]* drain.*" "$d.txt" | tail -1
  grep -h "^# pm_\|^# warning" "$d/pm.csv" 2>/dev/null | head -8
  grep -hiE "warning|error" "$d.txt" | grep -v "^# " | head -4
  # A run cut by the timeout must not leave llm.c holding the counters for the next.
  pkill -9 -f train_gpt2cu 2>/dev/null && echo "(killed a train_gpt2cu left running)"
done
fi

if want floor; then
  for case in ${FLOOR_CASES:-default:100us default:50us default:20us dram:20us dram:10us}; do
    IFS=: read -r metrics interval <<<"$case"
    timeout -k 5 60 "$ROOT/.gpu/bin/pm_decode_floor" --metrics "$metrics" --interval "$interval" --load mlp --seconds 5 \
      2>&1 | tail -2
  done
fi

if want ncu; then
  n=${NCU_STEPS:-20}; m=${NCU_METRICS:-dram}; [ "$m" = dram ] && m=$DRAM
  # NCU_PROGRAM: llmc (the default) or ng, nanoGPT's train.py (public, unmodified, eager, bf16)
  # at GPT-2 small's shape, one micro-step per iteration (NCU_STEPS iterations).
  if [ "${NCU_PROGRAM:-llmc}" = ng ]; then
    cd "$R/nanogpt"
    P=(python3 torch_launch.py train.py --dataset=synthetic --batch_size=8 --block_size=1024 --n_layer=12 --n_head=12
      --n_embd=768 --eval_interval=1000000 --eval_iters=1 --log_interval=1 --gradient_accumulation_steps=1
      --dtype=bfloat16 --always_save_checkpoint=False --out_dir=/tmp/nanogpt-out --compile=False --dropout=0.0
      --max_iters="$n")
  else
    cd "$R/llmc"
    P=("${LLMC[@]}" -x "$n")
  fi
  p=${NCU_PROGRAM:-llmc}
  /usr/bin/time -f "%e s" "${P[@]}" > "$out/ncu-native-$p.txt" 2>&1
  GMPROF_LOG=gmprof=info timeout -k 5 "${T:-300}" "$G" run --mode trace --pm-sampling "$m" \
    --pm-interval "${NCU_INTERVAL:-20us}" -o "$out/ncu-pm-$p" -- "${P[@]}" > "$out/ncu-pm-$p.txt" 2>&1
  echo "== $p under gmprof (PM ${NCU_INTERVAL:-20us}): exit $?"
  python3 "$ROOT/scripts/check/pc_check.py" overhead "$p --pm-sampling $m at ${NCU_INTERVAL:-20us}" 1.05 \
    "$out/ncu-native-$p.txt" -- "$out/ncu-pm-$p.txt"
  grep -ho "PM sampling: [0-9]* drain.*" "$out/ncu-pm-$p.txt" | tail -1
  grep -h "^# pm_\(interval\|samples\|hw_buffer\|missing\)\|^# warning" "$out/ncu-pm-$p/pm.csv" | head -8
  pkill -9 -f train_gpt2cu 2>/dev/null
  timeout -k 5 "${T_NCU:-400}" ncu --csv --print-units base --cache-control none --clock-control none \
    --metrics dram__bytes_read.sum,gpu__time_duration.sum "${P[@]}" > "$out/ncu-$p.csv" 2> "$out/ncu-$p.err"
  echo "== ncu: exit $?, $(grep -c '"dram__bytes_read.sum"' "$out/ncu-$p.csv") kernels"
  cd "$ROOT"
  python3 scripts/check/pm_vs_ncu.py "$out/ncu-$p.csv" "$out/ncu-pm-$p/pm.csv"
  # pm.csv is too large to come back from the GPU machine: its kernel rows of DRAM read bytes,
  # compressed, for looking at the kernels past p90 here.
  { grep -m1 '^"scope"' "$out/ncu-pm-$p/pm.csv"; grep '^"kernel",.*"dram__bytes_read.sum.per_second"' "$out/ncu-pm-$p/pm.csv"; } \
    | xz -9 > "$out/pm-kernels-dram-read-$p.csv.xz"
fi