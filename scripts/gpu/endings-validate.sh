#!/usr/bin/env bash
# Every end of a run writes what was collected (issue "nothing lost"), on the GPU machine.
#
#   scripts/gpu-stage --features gpu          # here
#   bash scripts/gpu/endings-validate.sh c    # there: the GPU test suite, then two unmodified
#                                             # C/CUDA programs in every mode, run to their end
#   bash scripts/gpu/endings-validate.sh py   # there: PyTorch ended by SIGTERM in every mode,
#                                             # the C ABI ended by SIGTERM, a kernel_replay run
#                                             # killed with SIGKILL (its checkpoint is read back)
#   bash scripts/gpu/endings-validate.sh odd  # there: exit() from another thread (C, two modes),
#                                             # an uncaught Python exception (C ABI; gmprof run)
#   bash scripts/gpu/endings-validate.sh sticky  # there: a kernel fails the context (illegal
#                                             # address, trap, brkpt) in every mode
# Logs go to $OUT (or out/endings). Each check prints ok/FAIL and check_run.py prints ALL OK.
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
export LD_LIBRARY_PATH=$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
export GMPROF_LIBRARY=$PWD/.gpu/lib/libgmprof.so PYTHONPATH=$PWD/.gpu/python PYTHONUNBUFFERED=1
out=${OUT:-out/endings}; mkdir -p "$out"
ulimit -c unlimited; echo /tmp/core.%p > /proc/sys/kernel/core_pattern 2>/dev/null
G=.gpu/bin/gmprof
DRAM=dram__bytes_read.sum,dram__bytes_write.sum
run() { echo; echo "\$ $*"; "$@"; echo "[exit $?]"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

case "${1:-c}" in
c)
  # The GPU suites (the CPU suites run in CI; some of them need cargo, which is not here).
  for t in .gpu/tests/gpu-* .gpu/tests/gpu_user_replay-* .gpu/tests/gpu_time-*; do
    echo "== $t"
    GMPROF_GPU_TEST_KERNELS=${GMPROF_GPU_TEST_KERNELS:-20000} "$t" --include-ignored --test-threads=1 2>&1 |
      grep -E "^test |test result|panicked"
  done
  run nvcc -O2 -arch=sm_90 -o /tmp/nvtx_vector_add examples/c/nvtx_vector_add.cu
  run nvcc -O2 -arch=sm_90 -o /tmp/nvtx_mlp_train examples/c/nvtx_mlp_train.cu
  echo '{"step": 10, "step/add": 5, "step/scale": 5, "left open": 1}' > /tmp/add_counts.json
  python3 - <<'PY'
import json
steps, layers = 3, 4
c = {}
for s in range(steps):
    t = "Train step %d" % s
    c[t] = 6 * layers + 1
    c[t + "/forward"] = 2 * layers
    c[t + "/loss"] = 1
    c[t + "/backward"] = 3 * layers
    c[t + "/optimizer"] = layers
    for l in range(layers):
        c[t + "/forward/layer %d" % l] = 2
        c[t + "/backward/layer %d" % l] = 3
json.dump(c, open("/tmp/mlp_counts.json", "w"))
PY
  for mode in kernel_replay per_kernel per_range trace; do
    metrics="--metrics $DRAM"; [ $mode = trace ] && metrics=""
    run timeout 300 $G run --mode $mode $metrics -o "$out/add-$mode" -- /tmp/nvtx_vector_add 5
    run python3 scripts/check/check_run.py "$out/add-$mode" --counts /tmp/add_counts.json --expect-end finished
    run timeout 300 $G run --mode $mode $metrics -o "$out/mlp-$mode" -- /tmp/nvtx_mlp_train 3 4
    # per_range measures the outermost level, so nested ranges' kernel counts are still exact.
    run python3 scripts/check/check_run.py "$out/mlp-$mode" --counts /tmp/mlp_counts.json --expect-end finished
  done
  ls /tmp/core.* 2>/dev/null && echo "CORE FILES FOUND" || echo "no core files"
  ;;
py)
  [ -x /tmp/nvtx_mlp_train ] || nvcc -O2 -arch=sm_90 -o /tmp/nvtx_mlp_train examples/c/nvtx_mlp_train.cu
  TT=.gpu/python/examples/torch_train.py
  # torch.profiler's counts for 3 and 4 steps: the first step warms up (more kernels), the
  # steady step is their difference.
  run timeout 300 python3 $TT --steps 3 --count-kernels /tmp/torch_counts3.json
  run timeout 300 python3 $TT --steps 4 --count-kernels /tmp/torch_counts4.json
  three=$(python3 -c "import json; print(json.load(open('/tmp/torch_counts3.json'))['step'])")
  per_step=$(python3 -c "import json; print(json.load(open('/tmp/torch_counts4.json'))['step'] - $three)")
  echo "torch.profiler: $three kernels in the first 3 steps, $per_step per steady step"
  for mode in trace per_kernel per_range kernel_replay; do
    metrics="--metrics $DRAM"; [ $mode = trace ] && metrics=""
    # timeout signals gmprof run, which passes SIGTERM on to the program.
    run timeout -s TERM ${PY_SECONDS:-35} $G run --mode $mode $metrics -o "$out/torch-term-$mode" -- python3 $TT --steps 100000
    run python3 scripts/check/check_run.py "$out/torch-term-$mode" --expect-end signal --per-instance step:$per_step --warmup 1 --first-sum step:3:$three
    python3 -c "import json; print('injection.json run_end:', json.load(open('$out/torch-term-$mode/injection.json')).get('run_end'))"
  done
  # The C ABI (python gmprof module) without gmprof run, SIGTERM straight to the program.
  run timeout -s TERM 30 python3 $TT --gmprof --mode trace --out "$out/torch-capi-term" --steps 100000
  # --gmprof annotates with gmprof.range, which torch.profiler does not count the same way:
  # the steps must be equal to each other after the first.
  per_capi=$(python3 -c "
import csv
rows = [r for r in csv.DictReader(l for l in open('$out/torch-capi-term/ranges.csv') if not l.startswith('#')) if r['path'] == 'step']
print(rows[1]['kernel_count'] if len(rows) > 1 else 0)")
  run python3 scripts/check/check_run.py "$out/torch-capi-term" --expect-end signal --per-instance step:$per_capi --warmup 1
  # A long kernel_replay run killed with SIGKILL: the last checkpoint is what is left.
  GMPROF_CHECKPOINT_SECS=4 GMPROF_RANGES_PER_CYCLE=100 $G run --mode kernel_replay --metrics $DRAM -o "$out/mlp-kill" -- /tmp/nvtx_mlp_train 1000 4 \
    > "$out/mlp-kill.log" 2>&1 &
  sleep 25; pid=$(pgrep -f "^/tmp/nvtx_mlp_train 1000" | head -1); echo "SIGKILL to $pid"; kill -9 "$pid"; wait
  tail -3 "$out/mlp-kill.log"
  run $G report "$out/mlp-kill"
  run python3 scripts/check/check_run.py "$out/mlp-kill" --expect-end checkpoint --per-instance "Train step 1:25"
  ls /tmp/core.* 2>/dev/null && echo "CORE FILES FOUND" || echo "no core files"
  ;;
odd)
  run nvcc -O2 -arch=sm_90 -o /tmp/exit_from_thread scripts/endings/exit_from_thread.cu
  for mode in trace kernel_replay; do
    run timeout 120 $G run --mode $mode -o "$out/exit-thread-$mode" -- /tmp/exit_from_thread
    run python3 scripts/check/check_run.py "$out/exit-thread-$mode" --expect-end finished --per-instance step:10
  done
  echo '{"step": 15}' > /tmp/uncaught_counts.json
  run timeout 120 python3 scripts/endings/uncaught.py "$out/uncaught-capi" gmprof
  run python3 scripts/check/check_run.py "$out/uncaught-capi" --expect-end finished --counts /tmp/uncaught_counts.json
  run timeout 120 $G run --mode per_kernel --metrics $DRAM -o "$out/uncaught-run" -- python3 scripts/endings/uncaught.py unused nvtx
  run python3 scripts/check/check_run.py "$out/uncaught-run" --expect-end finished --counts /tmp/uncaught_counts.json
  ;;
sticky)
  # A sticky CUDA error in step 3: every output is still written (small counter cycles, so
  # steps 0-2 are decoded before the error). 90 s each: a finish that hangs on the failed
  # context is a failure too (exit 124), and six runs fit in one 10-minute GPU call.
  run nvcc -O2 -arch=sm_90 -o /tmp/sticky_error scripts/endings/sticky_error.cu
  for mode in kernel_replay per_kernel per_range trace; do
    metrics="--metrics $DRAM" counters=--counters cycle=4
    [ $mode = trace ] && metrics="" counters=""
    [ $mode = per_range ] && cycle=1
    log="$out/sticky-$mode.log"
    GMPROF_RANGES_PER_CYCLE=$cycle timeout 90 $G run --mode $mode $metrics -o "$out/sticky-$mode" -- /tmp/sticky_error address > "$log" 2>&1
    echo "[exit $?]"; cat "$log"
    run python3 scripts/endings/check_sticky.py "$out/sticky-$mode" "$log" --code 700 $counters
  done
  # The other kinds of failure, in nanoGPT's mode; the code is what the program printed.
  for how in trap brkpt; do
    log="$out/sticky-$how.log"
    GMPROF_RANGES_PER_CYCLE=4 timeout 90 $G run --mode kernel_replay --metrics $DRAM -o "$out/sticky-$how" -- /tmp/sticky_error $how > "$log" 2>&1
    echo "[exit $?]"; cat "$log"
    code=$(sed -n 's/^sticky_error: .*(\([0-9]*\))$/\1/p' "$log")
    run python3 scripts/endings/check_sticky.py "$out/sticky-$how" "$log" --code "${code:-0}" --counters
  done
  ls /tmp/core.* 2>/dev/null && echo "CORE FILES FOUND" || echo "no core files"
  ;;
esac
