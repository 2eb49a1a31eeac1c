#!/usr/bin/env bash
# Isolates the SIGSEGV of `gmprof run --mode trace --pc-sampling --pm-sampling default` on nanoGPT
# (GPT-2 124M shape, B=8, T=1024, eager; ecosystem-validate.sh's showcase): PC sampling alone,
# PM sampling alone, both; core files kept and read with cuda-gdb.
#   CASES="pc pm both" ITERS=4 bash scripts/gpu/pc-pm-crash.sh
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
out=$(mkdir -p "${LOGS:-out/pc-pm}" && cd "${LOGS:-out/pc-pm}" && pwd)
ulimit -c unlimited; echo "$out/core.%p" > /proc/sys/kernel/core_pattern 2>/dev/null; cat /proc/sys/kernel/core_pattern
cd "$R/nanogpt"
NG=(python3 train.py --dataset=synthetic --batch_size=8 --block_size=1024 --n_layer=12 --n_head=12 --n_embd=768
  --eval_interval=100000 --eval_iters=1 --log_interval=1 --gradient_accumulation_steps=1 --dtype=bfloat16
  --always_save_checkpoint=False --out_dir=/tmp/nanogpt-show --compile=False --max_iters="${ITERS:-4}")
for c in ${CASES:-pc pm both}; do
  case $c in
    pc) F=(--pc-sampling) ;;
    pm) F=(--pm-sampling default) ;;
    both) F=(--pc-sampling --pm-sampling default) ;;
  esac
  rm -rf "$out/$c"; t0=$SECONDS
  GMPROF_LOG=${LOG_FILTER:-gmprof=info} timeout 300 "$G" run --torch-steps --mode trace "${F[@]}" -o "$out/$c" -- "${NG[@]}" > "$out/$c.txt" 2>&1
  echo "== $c: exit $? in $((SECONDS - t0)) s"; grep -vE "^Overriding|^iter|FutureWarning|scaler =" "$out/$c.txt" | cut -c1-300 | tail -25
  ls "$out/$c" 2>/dev/null | tr '\n' ' '; echo
done
for core in "$out"/core.*; do
  [ -e "$core" ] || continue
  echo "== backtrace of $core"
  timeout 200 cuda-gdb -batch -ex 'thread apply all bt 25' "$(command -v python3)" "$core" > "$core.bt.txt" 2>&1
  grep -nE "^Thread|#[0-9]+ " "$core.bt.txt" | grep -B2 -A22 -iE "SIGSEGV|gmprof|cupti" | head -120
  rm -f "$core"
done
