#!/usr/bin/env bash
# Issue 45 on GPUs: live metrics scraped during real runs, the exporter's overhead, Kineto
# traces of a torchrun DDP job for HTA, and the showcase report.
#
# Here: scripts/gpu-stage --no-tests, scripts/real/stage.sh (llm.c, nanoGPT in .real/).
# There, from the repo root with .gpu/ and .real/ carried, on a 2-GPU machine:
#   SECTIONS="live kineto overhead showcase" bash scripts/gpu/ecosystem-validate.sh
# Sections:
#   live      nanoGPT's train.py under torchrun, 2 ranks (NCCL), eager, trace mode with
#             --metrics-port 9400 (rank r serves 9400+r); scripts/check/scrape_live.py scrapes
#             both every SCRAPE_S s while it runs; check_live_scrapes.py checks every scrape
#             against each rank's steps table.
#   kineto    the same job, ITERS_K iterations, --trace-format kineto (whole-file outputs),
#             `gmprof check-trace` per rank; the traces and tables are packed into
#             $out/kineto.tgz for scripts/check/hta_check.py (run here or on the build machine).
#   overhead  llm.c (GPT-2 124M, B=4, T=1024) on GPU 0, OH_STEPS steps, ROUNDS rounds of:
#             native, streamed trace (GMPROF_STREAM=1), streamed trace with --metrics-port and a
#             scrape every second; step-time statistics by scripts/check/step_times.py.
#   showcase  nanoGPT (GPT-2 124M shape, B=8, T=1024), one GPU, per_kernel with DRAM bytes and
#             warp instructions (one pass: DRAM bandwidth and the roofline), SHOW_ITERS
#             iterations; its report.json is kept for the README's picture
#             (scripts/showcase.sh renders it). PC sampling and PM sampling do not run together
#             (refused: with both on CUPTI crashed the program at exit).
# Logs and outputs in ${LOGS:-out/ecosystem}.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
out=$(mkdir -p "${LOGS:-out/ecosystem}" && cd "${LOGS:-out/ecosystem}" && pwd)
want() { case " ${SECTIONS:-live kineto overhead showcase} " in *" $1 "*) return 0;; esac; return 1; }
run() { echo; echo "\$ $*"; local t0=$SECONDS; timeout "${T:-300}" "$@"; local rc=$?; echo "[exit $rc, $((SECONDS - t0)) s]"; return $rc; }
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; date -u

NGARGS=(train.py --dataset=synthetic --batch_size=8 --block_size=256 --n_layer=4 --n_head=4 --n_embd=256
  --eval_interval=100000 --eval_iters=1 --log_interval=1 --gradient_accumulation_steps=2 --dtype=bfloat16
  --always_save_checkpoint=False --out_dir=/tmp/nanogpt-ddp --compile=False)

if want live; then
  cd "$R/nanogpt"
  rm -rf "$out/live" "$out/live.done"
  python3 "$ROOT/scripts/check/scrape_live.py" --ports 9400,9401 --interval "${SCRAPE_S:-0.5}" \
    --out "$out/live-scrapes.jsonl" --until "$out/live.done" --timeout 400 > "$out/live-scraper.txt" 2>&1 &
  scraper=$!
  run "$G" run --torch-steps --mode trace --metrics-port 9400 -o "$out/live" -- torchrun --standalone \
    --nproc_per_node=2 torch_launch.py "${NGARGS[@]}" --max_iters="${ITERS_L:-400}" > "$out/live.txt" 2>&1
  echo "[gmprof run exit $?]"; touch "$out/live.done"; wait $scraper; cat "$out/live-scraper.txt"
  grep -E "^gmprof: (rank|wrote|warning)|warning|error|flag" "$out/live.txt" | head -12
  find "$out/live" -name report.json | sort | sed "s|$out/||"
  python3 "$ROOT/scripts/check/check_live_scrapes.py" "$out/live" "$out/live-scrapes.jsonl"
  cd "$ROOT"
fi

if want kineto; then
  cd "$R/nanogpt"
  rm -rf "$out/kineto"
  run "$G" run --torch-steps --mode trace --trace-format kineto -o "$out/kineto" -- torchrun --standalone \
    --nproc_per_node=2 torch_launch.py "${NGARGS[@]}" --max_iters="${ITERS_K:-8}" > "$out/kineto.txt" 2>&1
  echo "[gmprof run exit $?]"; grep -E "warning|error|flag" "$out/kineto.txt" | head -8
  for t in $(find "$out/kineto" -name trace.json | sort); do
    echo "check-trace ${t#$out/}: $("$G" check-trace "$t" 2>&1 | tail -1)"; ls -la "$(dirname "$t")" | awk '{print $5, $9}' | tr '\n' ' '; echo
  done
  tar -C "$out" -czf "$out/kineto.tgz" --exclude='*.html' --exclude='*.parquet' kineto
  cd "$ROOT"
fi

if want overhead; then
  cd "$R/llmc"
  LLMC=(stdbuf -oL ./train_gpt2cu -i data/train.bin -j data/val.bin -e d12 -b 4 -t 1024 -v 100000 -s 100000 -x "${OH_STEPS:-300}")
  for round in $(seq 1 "${ROUNDS:-2}"); do
    CUDA_VISIBLE_DEVICES=0 run "${LLMC[@]}" > "$out/oh-native-$round.txt" 2>&1
    CUDA_VISIBLE_DEVICES=0 GMPROF_STREAM=1 run "$G" run --mode trace -o "/tmp/oh-trace-$round" -- "${LLMC[@]}" > "$out/oh-trace-$round.txt" 2>&1
    rm -f /tmp/oh-live.done
    python3 "$ROOT/scripts/check/scrape_live.py" --ports 9500 --interval 1 --out "$out/oh-scrapes-$round.jsonl" \
      --until /tmp/oh-live.done --timeout 300 > /dev/null 2>&1 &
    s=$!
    CUDA_VISIBLE_DEVICES=0 run "$G" run --mode trace --metrics-port 9500 -o "/tmp/oh-live-$round" -- "${LLMC[@]}" > "$out/oh-live-$round.txt" 2>&1
    touch /tmp/oh-live.done; wait $s; echo "scrapes: $(wc -l < "$out/oh-scrapes-$round.jsonl")"
  done
  python3 "$ROOT/scripts/check/step_times.py" --skip 20 $(for r in $(seq 1 "${ROUNDS:-2}"); do echo "$out/oh-native-$r.txt"; done) \
    $(for r in $(seq 1 "${ROUNDS:-2}"); do echo "$out/oh-trace-$r.txt"; done) $(for r in $(seq 1 "${ROUNDS:-2}"); do echo "$out/oh-live-$r.txt"; done)
  python3 "$ROOT/scripts/check/check_live_scrapes.py" "/tmp/oh-live-1" "$out/oh-scrapes-1.jsonl"
  cd "$ROOT"
fi

if want showcase; then
  cd "$R/nanogpt"
  rm -rf "$out/showcase"
  CUDA_VISIBLE_DEVICES=0 run "$G" run --torch-steps --mode per_kernel --metrics "${SHOW_METRICS:-dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum}" -o "$out/showcase" -- \
    python3 train.py --dataset=synthetic --batch_size=8 --block_size=1024 --n_layer=12 --n_head=12 --n_embd=768 \
    --eval_interval=100000 --eval_iters=1 --log_interval=1 --gradient_accumulation_steps=1 --dtype=bfloat16 \
    --always_save_checkpoint=False --out_dir=/tmp/nanogpt-show --compile=False --max_iters="${SHOW_ITERS:-6}" > "$out/showcase.txt" 2>&1
  echo "[gmprof run exit $?]"; sed -n '/^gmprof 0/,$p' "$out/showcase.txt" | head -40
  ls -la "$out/showcase"
  gzip -c "$out/showcase/report.json" > "$out/showcase-report.json.gz"
  cd "$ROOT"
fi
echo "logs in $out"
