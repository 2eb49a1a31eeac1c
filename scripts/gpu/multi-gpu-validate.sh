#!/usr/bin/env bash
# Every GPU of a process, on a 2-GPU machine: one process driving two GPUs under `gmprof run`
# in every mode, against torch.profiler's kernel counts per device; per_kernel DRAM bytes on
# GPU 1 against the same kernels alone on one GPU; torchrun DDP (nanoGPT, two ranks) in every
# mode with a merged report; the spawn/fork children check.
#
# Here: scripts/gpu-stage --no-tests, and scripts/real/stage.sh for .real/ (nanoGPT).
# There, from the repo root with .gpu/ and .real/ carried:
#   SECTIONS="counts modes late dram ddp children" bash scripts/gpu/multi-gpu-validate.sh
# Logs and outputs go to ${LOGS:-out/multi-gpu}.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
T2=$ROOT/scripts/multi/two_gpus.py
CHECK=$ROOT/scripts/multi/check_devices.py
out=$(mkdir -p "${LOGS:-out/multi-gpu}" && cd "${LOGS:-out/multi-gpu}" && pwd)
want() { case " ${SECTIONS:-counts modes late dram ddp children} " in *" $1 "*) return 0;; esac; return 1; }
run() { echo; echo "\$ $*"; local t0=$SECONDS; timeout "${T:-240}" "$@"; local rc=$?; echo "[exit $rc, $((SECONDS - t0)) s]"; return $rc; }
first_lines() { sed -n '/^gmprof 0/,/^$/p' "$1" | head -4; grep -q '^gmprof 0' "$1" || tail -12 "$1"; }
STEPS=${STEPS:-4}
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; date -u

if want counts; then
  for kind in pipeline data_parallel; do
    run python3 "$T2" "$kind" --steps "$STEPS" --count "$out/ref-$kind.json"
  done
  run python3 "$T2" pipeline --steps "$STEPS" --late-step 2 --count "$out/ref-late.json"
fi

if want modes; then
  for kind in ${KINDS:-pipeline data_parallel}; do
    for mode in ${MODES:-trace per_kernel per_range kernel_replay}; do
      run "$G" run --mode "$mode" -o "$out/$kind-$mode" -- python3 "$T2" "$kind" --steps "$STEPS" > "$out/$kind-$mode.txt" 2>&1
      first_lines "$out/$kind-$mode.txt"
      python3 "$CHECK" counts "$out/$kind-$mode" "$out/ref-$kind.json"
    done
  done
fi

# A run that does not end: the stacks of every thread, while it hangs.
if want hang; then
  ( GMPROF_LOG=debug "$G" run --mode "${HANG_MODE:-kernel_replay}" -o "$out/hang" -- python3 "$T2" "${HANG_KIND:-data_parallel}" --steps "$STEPS" > "$out/hang.txt" 2>&1 & )
  sleep "${HANG_WAIT:-60}"
  pid=$(pgrep -f "^python3 .*two_gpus.py ${HANG_KIND:-data_parallel}" | head -1)
  echo "hang: pid $pid"; tail -5 "$out/hang.txt"
  [ -n "$pid" ] && timeout 120 cuda-gdb -p "$pid" -batch -ex 'thread apply all bt 30' > "$out/hang-bt.txt" 2>&1
  grep -nE "^Thread|gmprof|cupti|Cupti" "$out/hang-bt.txt" | head -80
  pkill -9 -f "two_gpus.py" ; sleep 2
fi

# kernel_replay and an NCCL collective over both GPUs of one process (nn.DataParallel's
# broadcast): CUPTI's kernel replay makes the launch wait for a kernel that waits for its
# peer; gmprof says so on stderr as it happens (then the run is killed here).
if want nccl-replay; then
  echo; echo "\$ timeout -s KILL 45 $G run --mode kernel_replay -- python3 two_gpus.py data_parallel --steps 1"
  timeout -s KILL 45 "$G" run --mode kernel_replay -o "$out/nccl-replay" -- python3 "$T2" data_parallel --steps 1 > "$out/nccl-replay.txt" 2>&1
  echo "[exit $?]"; grep -E "NCCL|hang" "$out/nccl-replay.txt" | head -3
  pkill -9 -f "two_gpus.py" ; sleep 1
fi

if want late; then
  for mode in trace per_kernel; do
    run "$G" run --mode "$mode" -o "$out/late-$mode" -- python3 "$T2" pipeline --steps "$STEPS" --late-step 2 > "$out/late-$mode.txt" 2>&1
    first_lines "$out/late-$mode.txt"
    python3 "$CHECK" counts "$out/late-$mode" "$out/ref-late.json"
  done
fi

if want dram; then
  M=dram__bytes_read.sum,gpu__time_duration.sum
  [ -d "$out/pipeline-dram" ] || run "$G" run --mode per_kernel --metrics "$M" -o "$out/pipeline-dram" -- python3 "$T2" pipeline --steps "$STEPS" > "$out/pipeline-dram.txt" 2>&1
  first_lines "$out/pipeline-dram.txt"
  CUDA_VISIBLE_DEVICES=1 run "$G" run --mode per_kernel --metrics "$M" -o "$out/alone-dram" -- python3 "$T2" alone --steps "$STEPS" > "$out/alone-dram.txt" 2>&1
  first_lines "$out/alone-dram.txt"
  python3 "$CHECK" dram "$out/pipeline-dram" "$out/alone-dram" 1
fi

# torchrun DDP: nanoGPT's train.py on two ranks (NCCL), eager, in every mode; one directory
# per rank, exit status 0, a merged summary.
NGARGS=(train.py --dataset=synthetic --batch_size=8 --block_size=256 --n_layer=4 --n_head=4 --n_embd=256
  --eval_interval=1000 --eval_iters=1 --log_interval=1 --gradient_accumulation_steps=2 --dtype=bfloat16
  --always_save_checkpoint=False --out_dir=/tmp/nanogpt-ddp --compile=False)
if want ddp; then
  cd "$R/nanogpt"
  for mode in trace per_kernel per_range kernel_replay; do
    iters=6; [ "$mode" = kernel_replay ] && iters=3
    run "$G" run --torch-steps --mode "$mode" -o "$out/ddp-$mode" -- torchrun --standalone --nproc_per_node=2 \
      torch_launch.py "${NGARGS[@]}" --max_iters=$iters > "$out/ddp-$mode.txt" 2>&1
    echo "[gmprof run exit $?]"; grep -E "^gmprof: (rank|vm|.*GPU)|^  |NOT PROFILED|error" "$out/ddp-$mode.txt" | head -6
    find "$out/ddp-$mode" -name report.json | sort | sed "s|$out/||"
    run "$G" merge "$out/ddp-$mode" > "$out/ddp-$mode-merge.txt" 2>&1; head -12 "$out/ddp-$mode-merge.txt"
    for d in $(find "$out/ddp-$mode" -name report.json -exec dirname {} \; | sort); do
      python3 "$ROOT"/scripts/real/check_modes.py step "$d" | head -2
    done
  done
  cd "$ROOT"
fi

if want children; then
  for method in spawn fork; do
    run "$G" run --mode trace -o "$out/children-$method" -- python3 "$ROOT"/scripts/multi/two_children.py "$method" 40 > "$out/children-$method.txt" 2>&1
    grep -E "two_children|wrote|error|exit" "$out/children-$method.txt" | head -8
    find "$out/children-$method" -name report.json | wc -l
  done
fi
tar -C "$out" -czf "$out/outputs.tgz" --exclude='*.tgz' --exclude='trace.json' --exclude='*.html' --exclude='*.parquet' . 2>/dev/null
echo "logs in $out"
