#!/usr/bin/env bash
# Validation and cost measurements of the kernel-replay mode on the GPU machine.
# Run from the repo root after scripts/gpu-stage --features gpu, with the staged .gpu/.
# Writes its logs to ${OUT:-out/validate}. Results are recorded in BENCHMARKS.md.
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH=$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
export PATH=$CUDA_HOME/bin:$PATH
out=${OUT:-out/validate}; mkdir -p "$out"
S=.gpu/bin/synthetic
run() { echo; echo "\$ $*"; timeout "${T:-120}" "$@"; echo "[exit $?]"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u

# 1. Per-kernel metrics against ncu (the reference): 20 vector adds over 2^24 floats.
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
run ncu --csv --print-units base --metrics $M $S --kernels 20 --size 16777216 --no-profile > "$out/ncu.csv" 2>"$out/ncu.err"
run $S --kernels 20 --size 16777216 --metrics dram__bytes_read.sum,dram__bytes_write.sum --out "$out/gmprof20"
run python3 scripts/check/compare_ncu.py "$out/ncu.csv" "$out/gmprof20/kernels.csv" --kernel vector_add --skip-ncu 1  # synthetic makes one warm-up launch before gmprof starts

# 2. Cost per profiled kernel (200 kernels, 2^24 floats = 192 MB working set): unprofiled, gmprof, ncu.
run $S --kernels 200 --size 16777216 --no-profile
run $S --kernels 200 --size 16777216
run $S --kernels 200 --size 16777216 --range-per-kernel
run $S --kernels 200 --size 16777216 --range-per-kernel --no-flush
/usr/bin/time -f "ncu 200 kernels: %e s wall, %U s user, %S s sys" ncu --metrics $M $S --kernels 200 --size 16777216 --no-profile >/dev/null 2>"$out/ncu-time.err"; tail -1 "$out/ncu-time.err"
/usr/bin/time -f "ncu 1 kernel (startup floor): %e s wall" ncu --metrics $M $S --kernels 1 --size 16777216 --no-profile >/dev/null 2>"$out/ncu-time1.err"; tail -1 "$out/ncu-time1.err"

# 3. The training example, unprofiled and profiled.
run .gpu/bin/train_loop --steps 5 --no-profile
run .gpu/bin/train_loop --steps 5 --out "$out/train"
