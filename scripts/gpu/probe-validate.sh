#!/usr/bin/env bash
# `gmprof run --probe` on the GPU machine (PTX probe engine). Expects the .gpu/ that
# scripts/gpu-stage stages. Writes everything under $PROBE_OUT (default out/probe-validate).
#   1. ptxas: every kernel of the golden PTX, probed with all built-in probes, assembles.
#   2. examples/c/probe_check.cu (PTX text + zstd fatbin through the driver API): outputs
#      bit-identical probed vs plain; gmem_bytes == 12*N on vector_add and saxpy, and within
#      1 % of ncu's L1 global load/store bytes; block_sched sees every block once, inside the
#      kernel's activity interval; overhead per probe.
#   3. PyTorch: a torch.compile'd Triton kernel probed through --probe-ptx-dir (Triton's
#      cache keeps the PTX of the cubin it loads), outputs bit-identical, the other kernels
#      listed as not probed with the reason.
#   4. A Triton matmul with more than 48 KB of dynamic shared memory
#      (python/examples/probe_big_shared.py): the probed copy gets the original's opt-in, its
#      launches are probed, and the output is the same.
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
export LD_LIBRARY_PATH=$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
export GMPROF_LIBRARY=$PWD/.gpu/lib/libgmprof.so PYTHONUNBUFFERED=1
out=${PROBE_OUT:-out/probe-validate}; mkdir -p "$out"
export GMPROF_PROBE_RECORD_LAUNCHES=${GMPROF_PROBE_RECORD_LAUNCHES:-0}
G=.gpu/bin/gmprof
run() { echo; echo "\$ $*"; timeout "${T:-120}" "$@"; echo "[exit $?]"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=tests/data/ptx
N=${N:-16777216}

# 1. ptxas on the probed golden PTX (the CPU test, with this machine's ptxas).
GMPROF_PTXAS=$(command -v ptxas) run .gpu/run.sh tests every_probed_kernel_assembles 2>&1 | tail -3

# 2. Driver-API program.
run nvcc -O2 -arch=sm_90 -o /tmp/probe_check examples/c/probe_check.cu -lcuda
run /tmp/probe_check $D/workloads_kernels_sm90.ptx $D/probe_kernels_default.fatbin $N | tee "$out/plain.txt"
run $G run --mode trace -o "$out/base" -- /tmp/probe_check $D/workloads_kernels_sm90.ptx $D/probe_kernels_default.fatbin $N
for p in block_sched gmem_bytes exec_count block_sched,gmem_bytes,exec_count; do
  name=${p//,/+}
  run $G run --mode trace --probe $p -o "$out/probe-$name" -- /tmp/probe_check $D/workloads_kernels_sm90.ptx $D/probe_kernels_default.fatbin $N | tee "$out/probed-$name.txt"
  run python3 scripts/check/check_probe.py same "$out/plain.txt" "$out/probed-$name.txt"
done
all="$out/probe-block_sched+gmem_bytes+exec_count"
# Maps through module variables (GMPROF_PROBE_MAPS=global): the launch's arguments untouched.
GMPROF_PROBE_MAPS=global run $G run --mode trace --probe block_sched,gmem_bytes,exec_count -o "$out/probe-global" -- /tmp/probe_check $D/workloads_kernels_sm90.ptx $D/probe_kernels_default.fatbin $N | tee "$out/probed-global.txt"
run python3 scripts/check/check_probe.py same "$out/plain.txt" "$out/probed-global.txt"
run python3 scripts/check/check_probe.py gmem "$out/probe-global" $N
run python3 scripts/check/check_probe.py sched "$out/probe-global"
cat "$out/probe-global/probe_launches.csv"
cat "$all/probe_kernels.csv" "$all/probe_launches.csv" "$all/probes.csv"
run ncu --cache-control none --clock-control none --csv --page raw \
  --metrics l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum \
  /tmp/probe_check $D/workloads_kernels_sm90.ptx $D/probe_kernels_default.fatbin $N > "$out/ncu.csv"
run python3 scripts/check/check_probe.py gmem "$out/probe-gmem_bytes" $N "$out/ncu.csv"
run python3 scripts/check/check_probe.py gmem "$all" $N "$out/ncu.csv"
run python3 scripts/check/check_probe.py sched "$out/probe-block_sched"
run python3 scripts/check/check_probe.py overhead "$out/base" "$out/probe-block_sched" "$out/probe-gmem_bytes" "$out/probe-exec_count" "$all"
run $G run --mode trace --probe gmem_bytes --probe-kernels 'vector_*' -o "$out/probe-select" -- /tmp/probe_check $D/workloads_kernels_sm90.ptx $D/probe_kernels_default.fatbin $N
run python3 scripts/check/check_probe.py kernels "$out/probe-select"

# 3. PyTorch + Triton.
export TRITON_CACHE_DIR=/tmp/gmprof-triton-cache
T=400 run python3 .gpu/python/examples/probe_torch.py | tee "$out/torch-plain.txt"
T=400 run $G run --mode trace -o "$out/torch-base" -- python3 .gpu/python/examples/probe_torch.py
T=400 run $G run --mode trace --probe block_sched,gmem_bytes --probe-ptx-dir $TRITON_CACHE_DIR -o "$out/torch-probe" -- python3 .gpu/python/examples/probe_torch.py | tee "$out/torch-probed.txt"
run python3 scripts/check/check_probe.py same "$out/torch-plain.txt" "$out/torch-probed.txt"
run python3 scripts/check/check_probe.py kernels "$out/torch-probe"
cat "$out/torch-probe/probe_launches.csv" | head -5
GMPROF_PROBE_MAPS=global T=400 run $G run --mode trace --probe block_sched,gmem_bytes --probe-ptx-dir $TRITON_CACHE_DIR -o "$out/torch-global" -- python3 .gpu/python/examples/probe_torch.py | tee "$out/torch-global.txt"
run python3 scripts/check/check_probe.py same "$out/torch-plain.txt" "$out/torch-global.txt"
run python3 scripts/check/check_probe.py kernels "$out/torch-global"
run python3 scripts/check/check_probe.py sched "$out/torch-global"
run python3 scripts/check/check_probe.py gmem "$out/torch-global" 4194304
for d in torch-base torch-probe torch-global; do echo "$d kernels.csv rows: $(grep -vc '^#' "$out/$d/kernels.csv")"; done
cat "$out/torch-global/probe_launches.csv" | head -8

# 4. More than 48 KB of dynamic shared memory.
T=300 run python3 .gpu/python/examples/probe_big_shared.py | tee "$out/big-plain.txt"
T=300 run $G run --mode trace --probe gmem_bytes --probe-ptx-dir $TRITON_CACHE_DIR -o "$out/big-probe" -- python3 .gpu/python/examples/probe_big_shared.py | tee "$out/big-probed.txt"
run python3 scripts/check/check_probe.py same "$out/big-plain.txt" "$out/big-probed.txt"
grep -i matmul "$out/big-probe/probe_kernels.csv"; grep -ic "not probed" "$out/big-probe/probe_launches.csv"
