#!/usr/bin/env bash
# Real programs nobody here wrote, under `gmprof run`, on the GPU machine: llm.c's GPT-2
# trainer (C/CUDA, cuBLASLt, NVTX ranges per step and layer) and nanoGPT's train.py (PyTorch,
# torch.compile, with and without CUDA graphs). Every mode, PM sampling and the probe engine;
# the kernel counts of each training step must agree between modes, every run must end with
# no loss counter, flagged row or warning, and every trace must pass `gmprof check-trace`.
#
# Here: scripts/gpu-stage, then scripts/real/stage.sh LLMC_SRC NANOGPT_SRC (builds .real/).
# There, from the repo root with .gpu/ and .real/ carried:
#   SECTIONS="llmc nanogpt" bash scripts/gpu/real-programs.sh
# Logs and outputs go to ${OUT:-out/real}; sections: llmc, ncu (llm.c per_kernel against ncu),
# nanogpt, multi (two nanoGPT processes under one gmprof run).
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
out=$(mkdir -p "${OUT:-out/real}" && cd "${OUT:-out/real}" && pwd)
want() { case " ${SECTIONS:-llmc ncu nanogpt multi} " in *" $1 "*) return 0;; esac; return 1; }
run() { echo; echo "\$ $*"; local t0=$SECONDS; timeout "${T:-240}" "$@"; local rc=$?; echo "[exit $rc, $((SECONDS - t0)) s]"; return $rc; }
head_of() { sed -n '/^gmprof 0/,/^$/p' "$1" | head -8; grep -q '^gmprof 0' "$1" || tail -15 "$1"; }  # the summary's first lines
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u

# llm.c: GPT-2 124M (d12) from scratch, B=4, T=1024. Its ranges: "Train step N", and per
# layer and function below it.
LLMC=("$R/llmc/train_gpt2cu" -i "$R/llmc/data/train.bin" -j "$R/llmc/data/val.bin" -e d12 -b 4 -t 1024 -v 1000 -s 1000)
if want llmc; then
  cd "$R/llmc"  # llm.c looks for gpt2_tokenizer.bin here (absent: it says so and skips sampling)
  run "${LLMC[@]}" -x 6 > "$out/llmc-native.txt" 2>&1; grep -E "^step|total average" "$out/llmc-native.txt" | tail -3
  for mode in trace per_range per_kernel; do
    run "$G" run --mode "$mode" --skip-first 1 -o "$out/llmc-$mode" -- "${LLMC[@]}" -x 6 > "$out/llmc-$mode.txt" 2>&1
    head_of "$out/llmc-$mode.txt"
  done
  run "$G" run --mode kernel_replay -o "$out/llmc-kernel_replay" -- "${LLMC[@]}" -x 2 > "$out/llmc-kernel_replay.txt" 2>&1
  head_of "$out/llmc-kernel_replay.txt"
  run "$G" run --mode trace --pm-sampling default -o "$out/llmc-pm" -- "${LLMC[@]}" -x 6 > "$out/llmc-pm.txt" 2>&1
  head_of "$out/llmc-pm.txt"
  # Its own kernels are runtime-registered (<<<>>>): their PTX comes from the executable's
  # .nv_fatbin. Same losses as the plain run, bit for bit.
  run "$G" run --mode trace --probe gmem_bytes,block_sched -o "$out/llmc-probe" -- "${LLMC[@]}" -x 3 > "$out/llmc-probe.txt" 2>&1
  head_of "$out/llmc-probe.txt"
  python3 "$ROOT"/scripts/check/check_probe.py kernels "$out/llmc-probe"
  python3 "$ROOT"/scripts/check/check_probe.py sched "$out/llmc-probe" | grep -v "^PASS" | head -20
  python3 "$ROOT"/scripts/check/check_probe.py sched "$out/llmc-probe" | grep -c "^PASS"
  run "${LLMC[@]}" -x 3 > "$out/llmc-native3.txt" 2>&1
  for f in native3 probe; do grep -E "^step +[0-9]+/" "$out/llmc-$f.txt" | sed -E 's/\| [0-9.]+ ms \|.*//' > "$out/llmc-$f.losses"; done
  [ -s "$out/llmc-probe.losses" ] && diff "$out/llmc-native3.losses" "$out/llmc-probe.losses" && echo "PASS llm.c losses and norms of 3 steps: probed = plain" \
    || echo "FAIL llm.c losses differ between the plain and the probed run"
  cd - > /dev/null
  python3 scripts/real/check_modes.py "Train step *" "$out"/llmc-{trace,per_range,per_kernel,kernel_replay,pm,probe}
  for m in trace per_kernel pm probe; do "$G" check-trace "$out/llmc-$m/trace.json" | tail -1; done
  "$G" check-trace "$out/llmc-probe/probe_trace.json" | tail -1
fi

# llm.c per_kernel against ncu on the same launches (kernel time and DRAM bytes).
if want ncu; then
  cd "$R/llmc"
  run ncu --csv --print-units base --cache-control none --clock-control none --launch-count 800 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum "${LLMC[@]}" -x 1 > "$out/llmc-ncu.csv" 2> "$out/llmc-ncu.err"
  cd - > /dev/null
  [ -f "$out/llmc-per_kernel/kernels.csv" ] && python3 scripts/check/compare_ncu.py "$out/llmc-ncu.csv" \
    "$out/llmc-per_kernel/kernels.csv" --stats --head | tail -12
fi

# nanoGPT: a 6-layer GPT (n_embd 384) on random tokens, torch.compile'd; "step" ranges come
# from `gmprof run --torch-steps` (torch.optim's global step hook), nothing in train.py changes.
# scripts/real/torch_launch.py only picks the torch.compile mode.
NG=(python3 torch_launch.py)
NGARGS=(train.py --dataset=synthetic --batch_size=8 --block_size=256 --n_layer=6 --n_head=6 --n_embd=384
  --eval_interval=1000 --eval_iters=1 --log_interval=1 --gradient_accumulation_steps=1 --dtype=bfloat16
  --always_save_checkpoint=False --out_dir=/tmp/nanogpt-out --compile=True)
if want nanogpt; then
  cd "$R/nanogpt"
  # Native runs first: they fill the inductor cache that the profiled runs then share.
  run "${NG[@]}" "${NGARGS[@]}" --max_iters=8 > "$out/nanogpt-native.txt" 2>&1; grep -E "^iter" "$out/nanogpt-native.txt" | tail -2
  run "${NG[@]}" --compile-mode reduce-overhead "${NGARGS[@]}" --max_iters=8 > "$out/nanogpt-graphs-native.txt" 2>&1
  grep -E "^iter" "$out/nanogpt-graphs-native.txt" | tail -2
  run "$G" run --torch-steps --mode trace --skip-first 1 -o "$out/nanogpt-trace" -- "${NG[@]}" "${NGARGS[@]}" --max_iters=8 > "$out/nanogpt-trace.txt" 2>&1
  head_of "$out/nanogpt-trace.txt"
  for mode in trace per_range per_kernel; do
    run "$G" run --torch-steps --mode "$mode" --skip-first 1 -o "$out/nanogpt-graphs-$mode" -- "${NG[@]}" --compile-mode reduce-overhead \
      "${NGARGS[@]}" --max_iters=8 > "$out/nanogpt-graphs-$mode.txt" 2>&1
    head_of "$out/nanogpt-graphs-$mode.txt"
  done
  run "$G" run --torch-steps --mode kernel_replay -o "$out/nanogpt-graphs-kernel_replay" -- "${NG[@]}" --compile-mode reduce-overhead \
    "${NGARGS[@]}" --max_iters=3 > "$out/nanogpt-graphs-kernel_replay.txt" 2>&1
  head_of "$out/nanogpt-graphs-kernel_replay.txt"
  run "$G" run --torch-steps --mode trace --pm-sampling default -o "$out/nanogpt-graphs-pm" -- "${NG[@]}" --compile-mode reduce-overhead \
    "${NGARGS[@]}" --max_iters=8 > "$out/nanogpt-graphs-pm.txt" 2>&1
  head_of "$out/nanogpt-graphs-pm.txt"
  run "$G" run --torch-steps --mode trace --probe gmem_bytes --probe-ptx-dir "${TRITON_CACHE_DIR:-$HOME/.triton/cache}" \
    -o "$out/nanogpt-probe" -- "${NG[@]}" "${NGARGS[@]}" --max_iters=4 > "$out/nanogpt-probe.txt" 2>&1
  head_of "$out/nanogpt-probe.txt"
  cut -d, -f1-4 "$out/nanogpt-probe/probe_kernels.csv" 2>/dev/null | head -8
  cd - > /dev/null
  python3 scripts/real/check_modes.py step "$out"/nanogpt-graphs-{trace,per_range,per_kernel,kernel_replay,pm}
  python3 scripts/real/check_modes.py step "$out"/nanogpt-trace "$out"/nanogpt-probe
  for m in trace graphs-trace graphs-per_kernel graphs-pm; do "$G" check-trace "$out/nanogpt-$m/trace.json" | tail -1; done
fi

# Two nanoGPT processes at once under one gmprof run: one output directory each, nothing
# overwritten, both complete.
if want multi; then
  cd "$R/nanogpt"
  run "$G" run --torch-steps --mode trace -o "$out/nanogpt-two" -- bash -c \
    "${NG[*]} ${NGARGS[*]} --max_iters=4 --out_dir=/tmp/ng-a & ${NG[*]} ${NGARGS[*]} --max_iters=4 --out_dir=/tmp/ng-b; wait" \
    > "$out/nanogpt-two.txt" 2>&1
  cd - > /dev/null
  find "$out/nanogpt-two" -name report.json | sort
  for d in $(find "$out/nanogpt-two" -name report.json -exec dirname {} \; | sort); do
    python3 scripts/real/check_modes.py step "$d" | head -3
  done
fi
tar -C "$out" -czf "$out/outputs.tgz" --exclude='*.tgz' --exclude='trace.json' --exclude='*.html' . 2>/dev/null
echo "logs in $out"
