#!/usr/bin/env bash
# per_kernel in rotation (--rotate) on real programs nobody here wrote: llm.c's GPT-2 trainer
# and nanoGPT's train.py (eager, --torch-steps). Per program:
#   diag      --rotate 16 on a short run: the summary's templates and how they differ;
#   overhead  native, --rotate (auto), native again: step times side by side (step_times.py);
#   full      --rotate 1 --rotate-cycles: every launch measured (per_kernel), with positions;
#   compare   the auto run's positions against the full run's (rotation_check.py) and against
#             ncu on one step of the main template (rotation_vs_ncu.py);
#   shapes    (nanoGPT) its evaluation every 50 iterations: a second step shape;
#   isolate   the unmeasured launch path alone (--rotate 1000000) against trace;
#   ncuprobe  (llm.c) what ncu's --launch-skip counts.
#   floor     the tracing floor: native, Nsight Systems (CUDA and NVTX), gmprof trace with and
#             without --torch-steps, interleaved ROUNDS times (what trace costs, and nsys beside it).
#
# Here: scripts/gpu-stage --no-tests --features gpu, then scripts/real/stage.sh (builds .real/).
# There, from the repo root with .gpu/ and .real/ carried:
#   SECTIONS="llmc nanogpt" PARTS="diag overhead full compare" STEPS=200 bash scripts/gpu/rotation-validate.sh
# Outputs in ${OUT:-out/rotation}; a copy of each report's rotation section in rotation-*.json.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
out=$(mkdir -p "${OUT:-out/rotation}" && cd "${OUT:-out/rotation}" && pwd)
want() { case " ${SECTIONS:-llmc nanogpt} " in *" $1 "*) return 0;; esac; return 1; }
part() { case " ${PARTS:-diag overhead full compare} " in *" $1 "*) return 0;; esac; return 1; }
run() { echo "\$ $*" | cut -c1-250; local t0=$SECONDS; timeout "${T:-400}" "$@"; local rc=$?; echo "[exit $rc, $((SECONDS - t0)) s]"; return $rc; }
summary() { sed -n '/^gmprof 0/,$p' "$1" | grep -vE "^(range |step |<root>|Train|  )" | head -${2:-14}; grep -q '^gmprof 0' "$1" || tail -15 "$1"; }
rotation_lines() { sed -n '/^rotation 1\//,/^[a-z<]/p' "$1" | head -${2:-30}; }
keep() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]+"/report.json")); json.dump({"rotation":r.get("rotation"),"metrics":[m["metric"]["name"] for m in r["meta"]["metrics"]],"pauses":r["meta"].get("profiler_pauses",[]),"warnings":r["meta"]["warnings"]},open(sys.argv[2],"w"))' "$1" "$2"; }
# The main template's ncu target: the launches before its 2nd step (those outside any step,
# all before the first step in these programs, then the steps before it) and its positions.
target() { python3 -c '
import csv, json, sys
d = sys.argv[1]
r = json.load(open(d + "/report.json"))["rotation"]
t = max(r["templates"], key=lambda t: (t["steps"], -t["template"]))
pos = {x["template"]: x["positions"] for x in r["templates"]}
idx = [i for i, x in enumerate(r["step_templates"]) if x == t["template"]]
k = idx[min(1, len(idx) - 1)]
rows = [x for x in csv.DictReader(l for l in open(d + "/kernels.csv") if not l.startswith("#")) if x["granularity"] != "graph_node"]
rows.sort(key=lambda x: int(x["correlation_id"]))
lead = next(i for i, x in enumerate(rows) if x["range_path"] != "<root>")
outside = r["launches_outside_steps"]
if lead != outside:
    print(f"WARNING: {outside} launches outside steps, {lead} before the first", file=sys.stderr)
print(t["positions"], lead + sum(pos[x] for x in r["step_templates"][:k]), k, sep="\t")' "$1"; }
ratio() { grep -v '^#' "$1/kernels.csv" | python3 -c '
import csv, statistics, sys
rows = [r for r in csv.DictReader(sys.stdin) if r["status"] == "ok" and r["range_duration_ns"] and r["duration_ns"]]
q = sorted(float(r["range_duration_ns"]) / float(r["duration_ns"]) for r in rows)
print(f"{sys.argv[1]}: measured launches {len(q)}; counter range time / activity time: median {q[len(q)//2]:.3f}, p10 {q[len(q)//10]:.3f}, p90 {q[9*len(q)//10]:.3f}")' "$1"; }
steps=${STEPS:-200}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
LLMC=("$R/llmc/train_gpt2cu" -i "$R/llmc/data/train.bin" -j "$R/llmc/data/val.bin" -e d12 -b 4 -t 1024 -v 100000 -s 100000)
# nanoGPT's GPT-2 124M shape (12 layers, n_embd 768, block 1024), batch 8, eager: the GPU's
# time, not Python's, sets the step time, so step times compare across runs (NG_ARGS overrides).
NG=(python3 train.py --dataset=synthetic ${NG_ARGS:---batch_size=8 --block_size=1024 --n_layer=12 --n_head=12 --n_embd=768}
  --eval_interval=100000 --eval_iters=1 --log_interval=1 --gradient_accumulation_steps=1 --dtype=bfloat16
  --always_save_checkpoint=False --out_dir=/tmp/nanogpt-out --compile=False)
for prog in llmc nanogpt; do
  want $prog || continue
  if [ $prog = llmc ]; then cd "$R/llmc"; P=("${LLMC[@]}"); X=(-x); TS=(); else cd "$R/nanogpt"; P=("${NG[@]}"); X=(--max_iters); TS=(--torch-steps); fi
  steps_arg() { if [ $prog = llmc ]; then echo "-x $1"; else echo "--max_iters=$1"; fi; }
  if part diag; then
    run "$G" run "${TS[@]}" --rotate 16 -o "$out/$prog-r16" -- "${P[@]}" $(steps_arg 40) > "$out/$prog-r16.txt" 2>&1
    summary "$out/$prog-r16.txt"; rotation_lines "$out/$prog-r16.txt" 40; keep "$out/$prog-r16" "$out/rotation-$prog-r16.json"
  fi
  if part overhead; then
    # Interleaved: native, trace, rotation (auto), ROUNDS times.
    for i in $(seq 1 "${ROUNDS:-2}"); do
      run "${P[@]}" $(steps_arg "$steps") > "$out/$prog-native$i.txt" 2>&1
      run "$G" run "${TS[@]}" --mode trace -o "$out/$prog-trace$i" -- "${P[@]}" $(steps_arg "$steps") > "$out/$prog-trace$i.txt" 2>&1
      run "$G" run "${TS[@]}" --rotate -o "$out/$prog-auto$i" -- "${P[@]}" $(steps_arg "$steps") > "$out/$prog-auto$i.txt" 2>&1
    done
    ln -sfn "$out/$prog-auto1" "$out/$prog-auto"
    summary "$out/$prog-auto1.txt"; rotation_lines "$out/$prog-auto1.txt" 30; keep "$out/$prog-auto1" "$out/rotation-$prog-auto.json"
    python3 "$ROOT"/scripts/check/step_times.py "$out/$prog-native1.txt" "$out"/$prog-{native,trace,auto}[0-9].txt
  fi
  if part shapes && [ $prog = nanogpt ]; then
    # Two step shapes: nanoGPT's own evaluation (estimate_loss) every 50 iterations runs
    # inside the step range that holds it.
    run "$G" run "${TS[@]}" --rotate -o "$out/$prog-shapes" -- "${P[@]}" $(steps_arg "$steps") --eval_interval=50 --eval_iters=2 \
      > "$out/$prog-shapes.txt" 2>&1
    summary "$out/$prog-shapes.txt" 6; rotation_lines "$out/$prog-shapes.txt" 30; keep "$out/$prog-shapes" "$out/rotation-$prog-shapes.json"
  fi
  if part isolate; then
    # Where the cost beside trace comes from: per_kernel with a rotation so long that almost
    # nothing is measured (the unmeasured launch path alone), against trace and auto.
    for i in $(seq 1 "${ROUNDS:-2}"); do
      run "${P[@]}" $(steps_arg "$steps") > "$out/$prog-inative$i.txt" 2>&1
      run "$G" run "${TS[@]}" --mode trace -o "$out/$prog-itrace$i" -- "${P[@]}" $(steps_arg "$steps") > "$out/$prog-itrace$i.txt" 2>&1
      run "$G" run "${TS[@]}" --rotate 1000000 -o "$out/$prog-inone$i" -- "${P[@]}" $(steps_arg "$steps") > "$out/$prog-inone$i.txt" 2>&1
      run "$G" run "${TS[@]}" --rotate -o "$out/$prog-iauto$i" -- "${P[@]}" $(steps_arg "$steps") > "$out/$prog-iauto$i.txt" 2>&1
    done
    python3 "$ROOT"/scripts/check/step_times.py "$out/$prog-inative1.txt" "$out"/$prog-i{native,trace,none,auto}[0-9].txt
    grep -h "^rotation 1/" "$out"/$prog-inone1.txt | head -2
  fi
  if part floor; then
    # A run refuses an output directory an earlier run left (a warm machine keeps /tmp).
    rm -rf "$out"/$prog-f*
    NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
    for i in $(seq 1 "${ROUNDS:-2}"); do
      run "${P[@]}" $(steps_arg "$steps") > "$out/$prog-fnative$i.txt" 2>&1
      run "$NSYS" profile -t cuda,nvtx -s none --cpuctxsw=none -f true -o "/tmp/$prog-nsys$i" "${P[@]}" $(steps_arg "$steps") \
        > "$out/$prog-fnsys$i.txt" 2>&1
      run "$G" run "${TS[@]}" --mode trace -o "$out/$prog-ftrace$i" -- "${P[@]}" $(steps_arg "$steps") > "$out/$prog-ftrace$i.txt" 2>&1
      # Without --torch-steps too (llm.c has no such option: its trace run is already plain).
      [ ${#TS[@]} -eq 0 ] || run "$G" run --mode trace -o "$out/$prog-fplain$i" -- "${P[@]}" $(steps_arg "$steps") \
        > "$out/$prog-fplain$i.txt" 2>&1
      python3 "$ROOT"/scripts/check/step_times.py "$out/$prog-fnative1.txt" "$out"/$prog-f{native,nsys,trace,plain}$i.txt 2>/dev/null
    done
    python3 "$ROOT"/scripts/check/step_times.py "$out/$prog-fnative1.txt" "$out"/$prog-f{native,nsys,trace,plain}[0-9].txt 2>/dev/null
  fi
  if part ncuprobe; then
    for args in "--launch-skip 5952 --launch-count 3" "--cache-control none --clock-control none --launch-skip 3472 --launch-count 3" \
      "--launch-skip 3472 --launch-count 496" "--launch-skip 4000 --launch-count 3"; do
      ncu --csv --print-units base --metrics gpu__time_duration.sum $args "${P[@]}" $(steps_arg 9) > "$out/probe.txt" 2>&1
      echo "ncu $args: rows $(grep -cE '^"[0-9]' "$out/probe.txt"); $(grep -E 'PROF|ERROR' "$out/probe.txt" | tail -2 | tr '\n' ' ')"
    done
  fi
  if part full; then
    run "$G" run "${TS[@]}" --rotate 1 --rotate-cycles -o "$out/$prog-full" -- "${P[@]}" $(steps_arg 30) > "$out/$prog-full.txt" 2>&1
    summary "$out/$prog-full.txt" 8; keep "$out/$prog-full" "$out/rotation-$prog-full.json"
    python3 "$ROOT"/scripts/check/step_times.py "$out/$prog-native1.txt" "$out/$prog-full.txt"
  fi
  if part compare; then
    for d in "$out/$prog-full" "$out/$prog-auto" "$out/$prog-r16"; do [ -f "$d/kernels.csv" ] && ratio "$d"; done
    for r in auto r16; do
      [ -f "$out/$prog-$r/report.json" ] && python3 "$ROOT"/scripts/check/rotation_check.py "$out/$prog-full" "$out/$prog-$r" | grep -v "^  template"
    done
    IFS=$'\t' read -r positions skip k <<< "$(target "$out/$prog-auto")"
    echo "ncu: step $k of the main template: --launch-skip $skip --launch-count $positions"
    run ncu --csv --print-units base --cache-control none --clock-control none \
      --launch-skip "$skip" --launch-count "$positions" --metrics gpu__time_duration.sum,dram__bytes_read.sum \
      "${P[@]}" $(steps_arg $((k + 3))) > "$out/$prog-ncu.csv" 2> "$out/$prog-ncu.err"
    tail -2 "$out/$prog-ncu.err"
    if ! grep -q '^"' "$out/$prog-ncu.csv"; then
      # What ncu does count here: its first launches, and a skip into the second step.
      for args in "--launch-count 3" "--launch-skip 100 --launch-count 3" "--launch-skip 3472 --launch-count 3"; do
        ncu --csv --print-units base --metrics gpu__time_duration.sum $args "${P[@]}" $(steps_arg 3) 2>&1 | grep -cE '^"[0-9]' | sed "s/^/ncu $args: rows /"
      done
    fi
    python3 "$ROOT"/scripts/check/rotation_vs_ncu.py "$out/$prog-ncu.csv" "$out/$prog-auto"
  fi
  cd "$ROOT"
done
echo "logs in $out"
