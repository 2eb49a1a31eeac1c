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
#   otlp      the live job with --otlp to scripts/check/otlp_receiver.py (carry .whl with
#             opentelemetry-proto and protobuf), checked by check_otlp_pushes.py; nanoGPT with
#             --pc-sampling and the endpoint: the stall-reason series.
#   ondemand  nanoGPT under --on-demand with the endpoint: step time exported while idle.
#   window    llm.c streamed with --slow-step wall:3x --trace-format kineto: the window's
#             trace.json is a Kineto trace that check-trace passes.
#   callcost  llm.c: native, trace mode, trace mode with --trace-format kineto (the timed launch
#             calls), ROUNDS rounds.
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

# OTLP push and PC sampling's stall reasons: the same DDP job with --otlp (a receiver on
# 127.0.0.1:4318, scripts/check/otlp_receiver.py, needs opentelemetry-proto and protobuf:
# carry .whl) and the endpoint; then nanoGPT on one GPU with --pc-sampling, scraped.
if want otlp; then
  cd "$R/nanogpt"
  rm -rf "$out/otlp" "$out/otlp.done"
  PYTHONPATH="${OTLP_SITE:-}${OTLP_SITE:+:}${PYTHONPATH:-}" python3 "$ROOT/scripts/check/otlp_receiver.py" --port 4318 --out "$out/otlp-pushes.jsonl" --until "$out/otlp.done" \
    > "$out/otlp-receiver.txt" 2>&1 &
  receiver=$!
  sleep 2
  run "$G" run --torch-steps --mode trace --otlp http://127.0.0.1:4318 --otlp-interval 1 -o "$out/otlp" -- torchrun \
    --standalone --nproc_per_node=2 torch_launch.py "${NGARGS[@]}" --max_iters="${ITERS_L:-400}" > "$out/otlp.txt" 2>&1
  echo "[gmprof run exit $?]"; touch "$out/otlp.done"; wait $receiver; cat "$out/otlp-receiver.txt"
  grep -E "warning|error|OTLP|otlp" "$out/otlp.txt" | head -8
  echo "pushes received: $(wc -l < "$out/otlp-pushes.jsonl")"
  python3 "$ROOT/scripts/check/check_otlp_pushes.py" "$out/otlp" "$out/otlp-pushes.jsonl"
  rm -rf "$out/pc-live" "$out/pc-live.done"
  python3 "$ROOT/scripts/check/scrape_live.py" --ports 9410 --interval 1 --out "$out/pc-live-scrapes.jsonl" \
    --until "$out/pc-live.done" --timeout 300 > /dev/null 2>&1 &
  scraper=$!
  CUDA_VISIBLE_DEVICES=0 run "$G" run --torch-steps --mode trace --pc-sampling --metrics-port 9410 -o "$out/pc-live" -- \
    python3 train.py "${NGARGS[@]:1}" --max_iters="${ITERS_PC:-60}" > "$out/pc-live.txt" 2>&1
  echo "[gmprof run exit $?]"; touch "$out/pc-live.done"; wait $scraper
  sed -n '/^gmprof 0/,/^$/p' "$out/pc-live.txt" | head -8
  python3 - "$out/pc-live-scrapes.jsonl" <<'PY'
import json, sys
last = [json.loads(l) for l in open(sys.argv[1])][-1]["samples"]
stalls = [(l.get("range"), l.get("reason"), v) for n, l, v in last if n == "gmprof_range_stall_samples_total"]
total = sum(v for n, l, v in last if n == "gmprof_pc_samples_total")
print(f"last scrape: {len(stalls)} stall series, {sum(v for *_, v in stalls):.0f} samples in them, gmprof_pc_samples_total {total:.0f}")
for r in sorted(stalls, key=lambda x: -x[2])[:6]:
    print("  ", r)
PY
  python3 "$ROOT/scripts/check/check_live_scrapes.py" "$out/pc-live" "$out/pc-live-scrapes.jsonl"
  cd "$ROOT"
fi

# On-demand idle: the step time is exported while no capture runs.
if want ondemand; then
  cd "$R/nanogpt"
  python3 "$ROOT/scripts/check/scrape_live.py" --ports 9420 --interval 1 --out "$out/idle-scrapes.jsonl" \
    --until "$out/idle.done" --timeout 300 > /dev/null 2>&1 &
  scraper=$!
  CUDA_VISIBLE_DEVICES=0 run "$G" run --torch-steps --on-demand --metrics-port 9420 -o "$out/idle" -- \
    python3 train.py "${NGARGS[@]:1}" --max_iters="${ITERS_IDLE:-300}" > "$out/idle.txt" 2>&1
  echo "[gmprof run exit $?]"; touch "$out/idle.done"; wait $scraper
  python3 - "$out/idle-scrapes.jsonl" "$out/idle.txt" <<'PY'
import json, re, statistics, sys
rows = [json.loads(l)["samples"] for l in open(sys.argv[1])]
get = lambda s, n: next((v for m, l, v in s if m == n), None)
steps = [get(s, "gmprof_steps_total") for s in rows]
print(f"{len(rows)} scrapes while idle; gmprof_steps_total {steps[:1]} .. {steps[-1:]}")
walls = [get(s, "gmprof_last_step_wall_seconds") for s in rows if get(s, "gmprof_last_step_wall_seconds")]
times = [float(m.group(1)) for m in re.finditer(r"^iter \d+: .*time ([0-9.]+)ms", open(sys.argv[2]).read(), re.M)]
if walls and times:
    print(f"scraped last-step wall time median {statistics.median(walls) * 1e3:.2f} ms; the program's own iteration time median {statistics.median(times[10:]):.2f} ms")
PY
  cd "$ROOT"
fi

# The flight recorder's window of a streamed Kineto run: llm.c with its validation steps
# (every 50) slower than the running median, --slow-step 3x, --trace-format kineto.
if want window; then
  cd "$R/llmc"
  rm -rf "$out/window"
  CUDA_VISIBLE_DEVICES=0 GMPROF_STREAM=1 run "$G" run --mode trace --slow-step wall:3x --trace-format kineto -o "$out/window" -- \
    ./train_gpt2cu -i data/train.bin -j data/val.bin -e d12 -b 4 -t 1024 -v 50 -s 100000 -x 120 > "$out/window.txt" 2>&1
  echo "[gmprof run exit $?]"; grep -E "flight|window|warning" "$out/window.txt" | head -8
  for t in "$out"/window/window-*/trace.json; do
    [ -e "$t" ] || { echo "no window written"; break; }
    echo "${t#$out/}: $("$G" check-trace "$t" 2>&1 | tail -1)"
    python3 -c "import json,sys; t=json.load(open(sys.argv[1])); e=t['traceEvents']; print('  Kineto:', 'deviceProperties' in t, 'kernels', sum(1 for x in e if x.get('cat')=='kernel'), 'launches', sum(1 for x in e if x.get('cat')=='cuda_runtime'))" "$t"
  done
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

# What timing the launch calls costs (the Kineto form's named and timed cuda_runtime events):
# llm.c, native against trace mode with gmprof's own trace and with --trace-format kineto.
if want callcost; then
  cd "$R/llmc"
  LLMC=(stdbuf -oL ./train_gpt2cu -i data/train.bin -j data/val.bin -e d12 -b 4 -t 1024 -v 100000 -s 100000 -x "${OH_STEPS:-300}")
  for round in $(seq 1 "${ROUNDS:-2}"); do
    CUDA_VISIBLE_DEVICES=0 run "${LLMC[@]}" > "$out/cc-native-$round.txt" 2>&1
    CUDA_VISIBLE_DEVICES=0 run "$G" run --mode trace -o "/tmp/cc-trace-$round" -- "${LLMC[@]}" > "$out/cc-trace-$round.txt" 2>&1
    CUDA_VISIBLE_DEVICES=0 run "$G" run --mode trace --trace-format kineto -o "/tmp/cc-kineto-$round" -- "${LLMC[@]}" > "$out/cc-kineto-$round.txt" 2>&1
  done
  python3 "$ROOT/scripts/check/step_times.py" --skip 20 $(for v in native trace kineto; do for r in $(seq 1 "${ROUNDS:-2}"); do echo "$out/cc-$v-$r.txt"; done; done)
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
