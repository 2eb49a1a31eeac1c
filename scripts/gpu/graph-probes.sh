#!/usr/bin/env bash
# Probes inside CUDA graphs (issue 43): Hugging Face's GPT-2 (scripts/graphs/hf_gpt2.py) under
# torch.compile(mode="reduce-overhead") with --probe exec_count, --probe-sass never and auto:
# the run ends with the native run's loss bits; the kernels built into graphs while Inductor
# captured them are probed there; their instructions per graph launch are compared with
# ncu --graph-profiling node (smsp__inst_executed.sum, the replayed steps only) and with the
# same run's eager launches of the same kernels; and the GPU time with probe counts is said.
# (The PTX path counts PTX instructions, exec_count.thread_instructions; ncu counts SASS
# instructions: the two differ by how ptxas compiled each kernel.)
#
#   scripts/gpu-stage --no-tests && (on the GPU machine) bash scripts/gpu/graph-probes.sh
#
# Variables: PART (graphs, the default; modes; all), STEPS (default 6), LAYERS (default 12),
# SASS (default "never auto"), NCU_KERNELS (ncu's kernel filter, default
# "--kernel-name regex:triton_"; empty: every kernel), NCU_LIMIT (seconds, default 400),
# PROBE_ARGS (more gmprof run arguments, e.g. --probe-sass-launches 3), OUT (logs; default
# out/graph-probes).
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
export PYTHONUNBUFFERED=1
STEPS=${STEPS:-6} LAYERS=${LAYERS:-12}
out=$(mkdir -p "${OUT:-out/graph-probes}" && cd "${OUT:-out/graph-probes}" && pwd)
W=/tmp/graph-probes; mkdir -p $W
prog=(python3 scripts/graphs/hf_gpt2.py --mode cudagraphs --steps "$STEPS" --layers "$LAYERS")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
loss() { grep -oE 'loss_bits=[0-9a-fx]+' "$1" | tail -1; }

if [ "${PART:-graphs}" != modes ]; then
timeout 300 "${prog[@]}" > "$out/native.log" 2>&1; echo "native: rc=$? $(loss "$out/native.log")"
# ncu on the replayed steps' Triton kernels, each graph node profiled as a kernel.
timeout "${NCU_LIMIT:-400}" ncu --graph-profiling node --nvtx --nvtx-include "measured/" --kernel-name-base function \
  ${NCU_KERNELS---kernel-name regex:triton_} --csv --print-units base --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum \
  --cache-control none --clock-control none "${prog[@]}" --measure-from 3 > $W/ncu.csv 2> "$out/ncu.err"
echo "ncu: rc=$? $(grep -c smsp__inst_executed $W/ncu.csv) result(s)"; grep -v '^==PROF==' "$out/ncu.err" | tail -3
for v in ${SASS:-never auto}; do
  rm -rf $W/probe-$v
  timeout 300 "$G" run --mode trace --probe exec_count --probe-sass $v ${PROBE_ARGS:-} -o $W/probe-$v -- "${prog[@]}" > "$out/probe-$v.log" 2>&1
  rc=$?
  verdict=FAIL; [ $rc -eq 0 ] && [ "$(loss "$out/probe-$v.log")" = "$(loss "$out/native.log")" ] && [ -n "$(loss "$out/native.log")" ] && verdict=PASS
  echo "$verdict probe --probe-sass $v: rc=$rc $(loss "$out/probe-$v.log") (native $(loss "$out/native.log"))"
  grep -E '^gmprof: probes|^probes:|^gmprof: SASS|warnings: |Error|error:' "$out/probe-$v.log" | grep -v warnings.warn | head -8 | sed 's/^/    /'
  for src in ptx-probe sass-metrics; do
    echo "    [$src]"
    python3 scripts/check/graph_probe_vs_ncu.py $W/probe-$v --source $src --ncu $W/ncu.csv 2>&1 | sed 's/^/    /'
  done
done
# The tables behind the comparisons, in one file.
tar -C $W -czf "$out/graph-probes-tables.tgz" ncu.csv $(cd $W && ls -d probe-*/probe_launches.csv probe-*/probes.csv \
  probe-*/probe_kernels.csv probe-*/kernels.csv 2>/dev/null)
fi

# PART=modes: CUPTI's SASS metrics beside each counter mode, which gmprof refuses (the SASS
# path runs beside --mode trace only). GMPROF_PROBE_SASS_ANY_MODE=1 lets them run, to measure
# why: bench/sass_metrics_floor.cu's `plain` launches (a spin loop and an axpy with known
# instruction counts, cuBLAS's SGEMM) counted in each mode, with the counters beside them.
if [ "${PART:-graphs}" = modes ] || [ "${PART:-graphs}" = all ]; then
  export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=/usr/local/cuda
  nvcc -O2 -std=c++17 -arch=sm_90 -o $W/smf bench/sass_metrics_floor.cu -I$CUDA_HOME/extras/CUPTI/include \
    -L$CUDA_HOME/extras/CUPTI/lib64 -lcupti -lcuda -lcublas 2>&1 | grep -E error
  for run in trace:probe per_kernel:plain per_kernel:probe per_range:plain per_range:probe kernel_replay:plain kernel_replay:probe; do
    mode=${run%%:*} how=${run##*:}
    # --probe-sass always through the environment: the staged command may predate the switch.
    args=(); sass=; [ $how = probe ] && args=(--probe exec_count) && sass=always
    rm -rf $W/smf-$mode-$how
    GMPROF_PROBE_SASS=$sass GMPROF_PROBE_SASS_ANY_MODE=1 timeout 120 "$G" run --mode $mode "${args[@]}" -o $W/smf-$mode-$how -- $W/smf plain \
      > "$out/smf-$mode-$how.log" 2>&1
    echo "--mode $mode ($how): rc=$?"
    grep -E '^gmprof: SASS|^probes:|flagged|warning|rror' "$out/smf-$mode-$how.log" | head -8 | sed 's/^/    /'
    [ -f $W/smf-$mode-$how/kernels.csv ] && python3 - $W/smf-$mode-$how <<'PY'
import csv, sys, collections, os
d = sys.argv[1]
rows = lambda p: list(csv.DictReader(l for l in open(p) if not l.startswith("#")))
if os.path.exists(f"{d}/probes.csv"):
    tot = collections.defaultdict(list)
    for t in rows(f"{d}/probes.csv"):
        if t["field"] == "instructions":
            tot[t["kernel"][:40]].append(int(t["total"]))
    for k, v in sorted(tot.items()):
        print(f"    SASS instructions {k}: {len(v)} launch(es), {sorted(set(v))[:4]}")
ks = rows(f"{d}/kernels.csv")
cols = [c for c in ks[0] if "__" in c] if ks else []
per = collections.defaultdict(lambda: collections.defaultdict(list))
for k in ks:
    for c in cols:
        if k[c]:
            per[k["kernel_name"][:40]][c].append(float(k[c]))
for name, cs in sorted(per.items()):
    print(f"    counters {name}: " + ", ".join(f"{c.split('.')[0]}={sum(v) / len(v):.4g}" for c, v in cs.items()))
blank = sum(1 for k in ks for c in cols if k[c] == "")
print(f"    kernels.csv: {len(ks)} rows, {len(cols)} counter column(s), {blank} blank counter value(s)")
PY
  done
  tar -C "$out" -czf "$out/smf-logs.tgz" $(cd "$out" && ls smf-*.log) && rm -f "$out"/smf-*.log
fi
