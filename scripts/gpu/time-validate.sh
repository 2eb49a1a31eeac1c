#!/usr/bin/env bash
# Kernel time and periodic-stall validation of the user-replay modes on the GPU machine, in
# one go. Run from the repo root after scripts/gpu-stage --features gpu, with the staged
# .gpu/. Writes its logs to ${OUT:-out/time-validate}; results are recorded in BENCHMARKS.md.
#   1. GPU tests: tests/gpu_time.rs, tests/gpu_user_replay.rs, tests/gpu.rs (3000 kernels).
#   2. per_kernel and trace kernel times against ncu on a mixed workload.
#   3. A CPU-bound loop: range GPU time per mode.
#   4. 100-step training loops: p50/p99 step time per mode; counter-cycle timings.
#   5. Launch-bound cost against the raw-CUPTI floors (bench/).
#   6. Trace mode against the CUPTI floor, interleaved rounds (section `floor`, not in the
#      default set): bench/cupti_floor.cu's configurations (CUPTI alone, with empty handlers)
#      and gmprof's trace mode in the same program on the same launch path
#      (cuLaunchKernel), then synthetic in trace mode with GMPROF_SELF_TIME=1, which
#      measures gmprof's own time in CUPTI's callbacks; and the cost of one clock read.
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH=$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
export PATH=$CUDA_HOME/bin:$PATH
out=${OUT:-out/time-validate}; mkdir -p "$out"
tmp=$(mktemp -d)
B=.gpu/bin
run() { echo; echo "\$ $*"; timeout "${T:-90}" "$@"; echo "[exit $?]"; }
# SECTIONS picks sections (default: all), e.g. SECTIONS="tests steps".
want() { case " ${SECTIONS:-tests gpurs ncu cpu steps launch} " in *" $1 "*) return 0;; esac; return 1; }
only() { grep -E "$1|^\\$ |\\[exit|error|panicked" | sed "s/\x1b\\[[0-9;]*m//g"; }  # keep the lines that matter

{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  ncu --version | tail -1; } > "$out/env.log" 2>&1

# 1. GPU tests.
want tests && { for t in .gpu/tests/gpu_time-* .gpu/tests/gpu_user_replay-*; do
    run "$t" --include-ignored --test-threads=1 --nocapture 2>&1 | grep -v "^\s*$"
  done
  want gpurs && GMPROF_GPU_TEST_KERNELS=3000 run .gpu/tests/gpu-* --include-ignored --test-threads=1 2>&1 | only "^test |test result|panicked|\[exit"
} > "$out/tests.log" 2>&1

# 2. Kernel time against ncu (the reference), paired in launch order; ncu also sees the
# warm-up step, so gmprof's kernels are paired with the tail of ncu's list.
want ncu && { M=gpu__time_duration.sum,dram__bytes_read.sum
  run ncu --csv --print-units base --cache-control none --clock-control none --metrics $M \
      $B/kernel_times --workload mixed --steps 6 --no-profile > "$tmp/ncu.csv" 2> "$tmp/ncu.err"
  tail -2 "$tmp/ncu.err"
  for mode in per_kernel trace per_range; do
    run $B/kernel_times --workload mixed --steps 6 --mode $mode --out "$tmp/mixed-$mode" | only "^kernel_times"
    run python3 scripts/check/compare_ncu.py "$tmp/ncu.csv" "$tmp/mixed-$mode/kernels.csv" --stats --tail
    run python3 scripts/check/compare_ncu.py "$tmp/ncu.csv" "$tmp/mixed-$mode/kernels.csv" --stats --tail --min-ns 10000 | grep "^time"
  done
  # Before this change per_kernel reported the CUPTI range's time: the same comparison on
  # range_duration_ns.
  python3 - "$tmp/mixed-per_kernel/kernels.csv" "$tmp/mixed-per_kernel/kernels-range.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#")))
with open(sys.argv[2], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=rows[0].keys())
    w.writeheader()
    for r in rows:
        r["duration_ns"] = r["range_duration_ns"]
        w.writerow(r)
PY
  echo "(per_kernel range_duration_ns, the old kernel time:)"
  python3 scripts/check/compare_ncu.py "$tmp/ncu.csv" "$tmp/mixed-per_kernel/kernels-range.csv" --stats --tail
} > "$out/ncu.log" 2>&1

# 3. CPU-bound loop: 10 steps of 20 small adds, each after 50 us of host work.
want cpu && { for mode in trace per_kernel per_range; do
    run $B/kernel_times --workload cpu_bound --steps 10 --mode $mode | only "^kernel_times"
  done
} > "$out/cpu_bound.log" 2>&1

# 4. Step times, synchronized, per mode. (a) 100 steps of train_loop with 384 extra tiny
# kernels per step (400 launches per step, like a transformer's): per_kernel with the default
# cycle size, and with 2000-range cycles (the old default) with background evaluation and on
# the launching thread (the old behaviour). (b) The plain train_loop's overhead per mode.
# GMPROF_LOG gives the counter image size and each cycle's timings.
want steps && { export GMPROF_LOG=gmprof=info
  S="--steps 100 --log-every 0 --step-times --extra-kernels 384"
  F="step_times|wall|counter cycle|counter image"
  run $B/train_loop $S --no-profile 2>&1 | only "$F"
  for mode in trace per_range per_kernel; do
    run $B/train_loop $S --mode $mode 2>&1 | only "$F"
  done
  run $B/train_loop $S --mode per_kernel --max-ranges-per-cycle 2000 2>&1 | only "$F"
  run $B/train_loop $S --mode per_kernel --max-ranges-per-cycle 2000 --sync-evaluate 2>&1 | only "$F"
  for mode in trace per_range per_kernel; do
    run $B/train_loop --steps 100 --log-every 0 --step-times --mode $mode --compare 2>&1 | only "$F|overhead"
  done
  unset GMPROF_LOG
} > "$out/steps.log" 2>&1

# 5. Launch-bound: 2000 adds of 65 536 floats, and train_loop at B=256, against the floors.
want launch && { I="-I$CUDA_HOME/extras/CUPTI/include -I$CUDA_HOME/targets/x86_64-linux/include -L$CUDA_HOME/targets/x86_64-linux/lib -L$CUDA_HOME/extras/CUPTI/lib64"
  nvcc -O2 -std=c++17 -arch=sm_90 -o "$tmp/range_floor" bench/range_floor.cu $I -lcupti -lcuda || echo "range_floor build failed"
  nvcc -O2 -std=c++17 -arch=sm_90 -o "$tmp/cupti_floor" bench/cupti_floor.cu $I -lcupti -lcuda || echo "cupti_floor build failed"
  run "$tmp/range_floor" 2000 65536 gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum | only "range_floor|dropped"
  run "$tmp/cupti_floor" 2000 65536 | only "cupti_floor"
  for mode in per_kernel per_range trace; do
    for i in 1 2; do
      run $B/synthetic --kernels 2000 --size 65536 --mode $mode --compare --warmup | only "overhead|error"
    done
  done
  for mode in per_kernel per_range trace; do
    run $B/train_loop --batch 256 --steps 50 --log-every 0 --mode $mode --compare | only "overhead|error"
  done
} > "$out/launch.log" 2>&1

# 6. Trace mode against the CUPTI floor, same launch path, interleaved. cupti_floor times
# every CUPTI configuration and gmprof itself (its `gmprof` configuration opens
# .gpu/lib/libgmprof.so) in one program on one launch path; BEFORE_LIB=path/to/libgmprof.so
# adds another build as `gmprof-before` (an A/B of a change). KERNELS launches per run
# (default 20000), FLOOR_REPS repeats per configuration (default 5). scripts/check/floor_stats.py
# prints the added time per launch and the ratio per configuration over all rounds.
want floor && { I="-I$CUDA_HOME/extras/CUPTI/include -I$CUDA_HOME/targets/x86_64-linux/include -L$CUDA_HOME/targets/x86_64-linux/lib -L$CUDA_HOME/extras/CUPTI/lib64"
  nvcc -O2 -std=c++17 -arch=sm_90 -o "$tmp/cupti_floor" bench/cupti_floor.cu $I -lcupti -lcuda || echo "cupti_floor build failed"
  export FLOOR_REPS=${FLOOR_REPS:-5}
  for round in $(seq "${ROUNDS:-5}"); do
    echo "== round $round"
    "$tmp/cupti_floor" "${KERNELS:-20000}" 65536 driver | only "cupti_floor config="
    if [ -n "${BEFORE_LIB:-}" ]; then
      GMPROF_LIBRARY=$BEFORE_LIB GMPROF_FLOOR_OUT=$tmp/before-$round "$tmp/cupti_floor" "${KERNELS:-20000}" 65536 driver gmprof \
        | sed 's/config=gmprof/config=gmprof-before/' | only "cupti_floor config=|gmprof_"
    fi
    GMPROF_LIBRARY=$PWD/.gpu/lib/libgmprof.so GMPROF_FLOOR_OUT=$tmp/gmprof-$round "$tmp/cupti_floor" "${KERNELS:-20000}" 65536 driver gmprof \
      | only "cupti_floor config=|gmprof_"
    GMPROF_SELF_TIME=1 run $B/synthetic --kernels "${KERNELS:-20000}" --size 65536 --mode trace --compare --warmup | only "overhead|self_time|error"
  done
  "$tmp/cupti_floor" clock
} > "$out/floor.log" 2>&1
want floor && python3 scripts/check/floor_stats.py "$out/floor.log" | tee "$out/floor-stats.txt"

want ncu && tar -C "$tmp" -czf "$out/csv.tgz" --exclude='*.json' mixed-per_kernel mixed-trace mixed-per_range ncu.csv 2>/dev/null
rm -rf "$tmp"
echo "logs in $out"; ls -la "$out"
