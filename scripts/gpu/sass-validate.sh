#!/usr/bin/env bash
# Probes on the kernels real programs run (issue: Inductor's Triton kernels through their
# cache, SASS-only kernels through CUPTI's SASS metrics), checked against ncu.
#
#   scripts/gpu-stage --no-tests && (on the GPU machine) bash scripts/gpu/sass-validate.sh
#
# Needs .gpu/ (scripts/gpu-stage) and .real/nanogpt (scripts/real/stage.sh). Writes under $OUT.
# 1. bench/sass_metrics_floor.cu (`plain`: a spin loop and an axpy of its own, cuBLAS's SGEMM):
#    --probe exec_count,gmem_bytes (auto: its kernels PTX-probed, cuBLAS's counted by SASS
#    metrics) and --probe-sass always, against ncu's smsp__inst_executed.sum.
# PART=cost instead: the recorded flushes of (1) for the CPU tests (GMPROF_PROBE_SASS_DUMP), and
# the cost on nanoGPT (10 iterations, eager and compiled): native, every launch counted, and
# --probe-sass-launches 2, with the parameter digests.
# 2. nanoGPT's train.py (public, unmodified), eager and torch.compile'd: native and probed
#    runs print the parameter digest (bit-identical weights), --probe-sass always against
#    ncu's smsp__inst_executed.sum per kernel launch (paired per kernel name in launch order),
#    and auto (Inductor's Triton kernels found in its cache and PTX-probed).
set -u
ROOT=$PWD
G=$ROOT/.gpu/bin/gmprof
R=$ROOT/${REAL:-.real}
export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=/usr/local/cuda
out=$(mkdir -p "${OUT:-out/sass}" && cd "${OUT:-out/sass}" && pwd)
W=/tmp/sassval; mkdir -p $W
run() { echo; echo "\$ $*"; local t0=$SECONDS; timeout "${T:-300}" "$@"; local rc=$?; echo "[exit $rc, $((SECONDS - t0)) s]"; return $rc; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
export PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$CUDA_HOME/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
M=smsp__inst_executed.sum,smsp__thread_inst_executed.sum

if [ "${PART:-}" = cost ]; then
  nvcc -O2 -std=c++17 -arch=sm_90 -lineinfo -o $W/smf bench/sass_metrics_floor.cu -I$CUDA_HOME/extras/CUPTI/include \
    -L$CUDA_HOME/extras/CUPTI/lib64 -lcupti -lcuda -lcublas 2>&1 | grep -E "error"
  rm -f $out/sass_flushes.jsonl
  GMPROF_PROBE_SASS_DUMP=$out/sass_flushes.jsonl run "$G" run --mode trace --probe exec_count,gmem_bytes --probe-sass always \
    -o $W/smf-dump -- $W/smf plain > $W/smf-dump.txt 2>&1
  wc -c $out/sass_flushes.jsonl
  cd "$R/nanogpt"
  for c in False True; do
    tag=eager; [ $c = True ] && tag=compiled
    NL=(python3 torch_launch.py --deterministic --param-digest train.py --dataset=synthetic --batch_size=8 --block_size=256
      --n_layer=4 --n_head=4 --n_embd=256 --eval_interval=1000 --eval_iters=1 --log_interval=1 --gradient_accumulation_steps=1
      --dtype=bfloat16 --always_save_checkpoint=False --out_dir=/tmp/nanogpt-out --max_iters=10 --dropout=0.0 --compile=$c)
    run "${NL[@]}" > $W/cost-$tag-native.txt 2>&1
    run "$G" run --mode trace --probe exec_count,gmem_bytes -o $W/cost-$tag-auto -- "${NL[@]}" > $W/cost-$tag-auto.txt 2>&1
    run "$G" run --mode trace --probe exec_count,gmem_bytes --probe-sass-launches 2 -o $W/cost-$tag-q2 -- "${NL[@]}" > $W/cost-$tag-q2.txt 2>&1
    for v in native auto q2; do
      echo "== $tag $v: $(grep 'param digest' $W/cost-$tag-$v.txt) | iter ms: $(grep -o 'iter [0-9]*: loss [0-9.]*, time [0-9.]*' $W/cost-$tag-$v.txt | awk '{print $6}' | tr '\n' ' ')"
      grep -E "^probes:|gmprof: (SASS|probes)" $W/cost-$tag-$v.txt $W/cost-$tag-$v/summary.txt 2>/dev/null | sort -u
    done
    [ -d $W/cost-$tag-auto ] && cut -d, -f3,14 $W/cost-$tag-auto/probe_kernels.csv | sort | uniq -c
  done
  cd "$ROOT"
  cd $W && tar -cJf $out/sass-cost.tar.xz $(ls -d smf-dump* cost-* 2>/dev/null); ls -la $out
  exit 0
fi
if [ -z "${SKIP_SMF:-}" ]; then
nvcc -O2 -std=c++17 -arch=sm_90 -lineinfo -o $W/smf bench/sass_metrics_floor.cu -I$CUDA_HOME/extras/CUPTI/include \
  -L$CUDA_HOME/extras/CUPTI/lib64 -lcupti -lcuda -lcublas 2>&1 | grep -v warning | grep -E "error" 
for how in auto always; do
  run "$G" run --mode trace --probe exec_count,gmem_bytes --probe-sass $how -o $W/smf-$how -- $W/smf plain > $W/smf-$how.txt 2>&1
  tail -3 $W/smf-$how.txt
  cut -d, -f1-4,14- $W/smf-$how/probe_kernels.csv | cut -c1-220
  python3 - $W/smf-$how <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1] + "/probes.csv")))
for r in rows:
    if r["probe"] == "exec_count":
        print("%-12s %-40s %s %s" % (r["correlation_id"], r["kernel"][:40], r["field"], r["total"]))
PY
done
run ncu --csv --print-units base --print-kernel-base mangled --cache-control none --clock-control none --metrics $M $W/smf plain > $W/ncu-smf.csv 2>&1
python3 scripts/check/sass_compare.py --ncu $W/ncu-smf.csv --gmprof $W/smf-always | tee $out/smf-compare.txt
fi

NGARGS=(train.py --dataset=synthetic --batch_size=8 --block_size=256 --n_layer=4 --n_head=4 --n_embd=256
  --eval_interval=1000 --eval_iters=1 --log_interval=1 --gradient_accumulation_steps=1 --dtype=bfloat16
  --always_save_checkpoint=False --out_dir=/tmp/nanogpt-out --max_iters=3 --dropout=0.0)
cd "$R/nanogpt"
for c in ${NG_COMPILE:-False True}; do
  tag=eager; [ $c = True ] && tag=compiled
  NL=(python3 torch_launch.py --deterministic --param-digest "${NGARGS[@]}" --compile=$c)
  run "${NL[@]}" > $W/ng-$tag-native.txt 2>&1; grep "param digest" $W/ng-$tag-native.txt
  run "${NL[@]}" > $W/ng-$tag-native2.txt 2>&1; grep "param digest" $W/ng-$tag-native2.txt
  run "$G" run --mode trace --probe exec_count,gmem_bytes -o $W/ng-$tag-auto -- "${NL[@]}" > $W/ng-$tag-auto.txt 2>&1
  grep -E "param digest|gmprof: (probes|SASS)" $W/ng-$tag-auto.txt
  run "$G" run --mode trace --probe exec_count --probe-sass always -o $W/ng-$tag-sass -- "${NL[@]}" > $W/ng-$tag-sass.txt 2>&1
  grep -E "param digest|gmprof: (probes|SASS)" $W/ng-$tag-sass.txt
  T=500 run ncu --csv --print-units base --print-kernel-base mangled --cache-control none --clock-control none --metrics $M "${NL[@]}" > $W/ncu-ng-$tag.csv 2>&1
  grep "param digest" $W/ncu-ng-$tag.csv
done
cd "$ROOT"
for c in ${NG_COMPILE:-False True}; do
  tag=eager; [ $c = True ] && tag=compiled
  python3 scripts/check/sass_compare.py --ncu $W/ncu-ng-$tag.csv --gmprof $W/ng-$tag-sass --coverage $W/ng-$tag-auto | tee $out/ng-$tag-compare.txt
done
cd $W && tar -cJf $out/sass-runs-${NG_COMPILE:-all}.tar.xz $(ls -d smf-* ng-* *.txt 2>/dev/null) ; ls -la $out
