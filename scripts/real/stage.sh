#!/usr/bin/env bash
# Stages real training programs that nobody here wrote, for scripts/gpu/real-programs.sh.
#
#   scripts/real/stage.sh LLMC_SRC NANOGPT_SRC [DEST]      (DEST defaults to .real)
#
# LLMC_SRC is a checkout of github.com/karpathy/llm.c, NANOGPT_SRC one of
# github.com/karpathy/nanoGPT. Builds llm.c's GPT-2 trainer (train_gpt2.cu: its own CUDA
# kernels, cuBLASLt, NVTX ranges on its layers) for sm_90 here, with NVIDIA's CUDA 13.0 nvcc
# and headers from PyPI, so the GPU machine only runs it; copies nanoGPT's train.py, model.py
# and configurator.py; and writes random GPT-2 tokens for both (scripts/real/make_tokens.py:
# the GPU machine has no network for their data preparation, and the profile does not depend
# on what the tokens say). One change to llm.c: CUDA 13's cudaMemAdvise takes a
# cudaMemLocation (llmc/cuda_utils.cuh, the managed-memory fallback); nothing else is touched.
# DEST is kept out of git (.git/info/exclude) and is carried to the GPU machine with .gpu/.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,16p' "$0"; exit 2; }
llmc_src=$(cd "$1" && pwd); nanogpt_src=$(cd "$2" && pwd)
root=$(git rev-parse --show-toplevel)
dest=${3:-$root/.real}
cache=${GMPROF_REAL_CACHE:-$root/target/real-toolchain}
exclude=$(git rev-parse --git-path info/exclude)
case "$dest" in "$root"/*) rel=/${dest#"$root"/}/; grep -qxF "$rel" "$exclude" 2>/dev/null || echo "$rel" >> "$exclude";; esac

# nvcc, the CUDA runtime, cuBLAS, CCCL, NVTX and cuda_profiler_api.h, CUDA 13.0 from PyPI.
if [ ! -x "$cache/nvidia/cu13/bin/nvcc" ]; then
  mkdir -p "$cache/wheels"
  python3 -m pip download -q --no-deps -d "$cache/wheels" 'nvidia-cuda-nvcc==13.0.*' 'nvidia-cuda-runtime==13.0.*' \
    'nvidia-cuda-crt==13.0.*' 'nvidia-nvvm==13.0.*' 'nvidia-cublas==13.*' 'nvidia-cuda-cccl==13.0.*' \
    'nvidia-nvtx==13.*' 'nvidia-cuda-profiler-api==13.0.*'
  for w in "$cache"/wheels/*.whl; do python3 -m zipfile -e "$w" "$cache"; done
  chmod +x "$cache"/nvidia/cu13/bin/* "$cache"/nvidia/cu13/nvvm/bin/* 2>/dev/null || true
fi
cu=$cache/nvidia/cu13
mkdir -p "$cache/link"
ln -sf "$cu/lib/libcublas.so.13" "$cache/link/libcublas.so"
ln -sf "$cu/lib/libcublasLt.so.13" "$cache/link/libcublasLt.so"

rm -rf "$dest" && mkdir -p "$dest/llmc" "$dest/nanogpt"
build=$(mktemp -d)
cp -r "$llmc_src"/. "$build"
sed -i 's/cudaMemAdvise(\*out, bytes, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' \
  "$build/llmc/cuda_utils.cuh"
# The flags of llm.c's Makefile for train_gpt2cu without cuDNN, MPI, NCCL or NVML.
( cd "$build" && PATH=$cu/bin:$PATH nvcc --threads=0 -t=0 --use_fast_math -std=c++17 -O3 \
    --generate-code 'arch=compute_90,code=[compute_90,sm_90]' train_gpt2.cu -I"$cu/include" \
    -L"$cache/link" -L"$cu/lib" -lcublas -lcublasLt -o "$dest/llmc/train_gpt2cu" )
# The same with -lineinfo (llm.c's Makefile adds it), for source lines of sampled instructions
# (scripts/gpu/pc-sampling-validate.sh).
( cd "$build" && PATH=$cu/bin:$PATH nvcc --threads=0 -t=0 --use_fast_math -std=c++17 -O3 -lineinfo \
    --generate-code 'arch=compute_90,code=[compute_90,sm_90]' train_gpt2.cu -I"$cu/include" \
    -L"$cache/link" -L"$cu/lib" -lcublas -lcublasLt -o "$dest/llmc/train_gpt2cu_lineinfo" )
( cd "$llmc_src" && git rev-parse HEAD 2>/dev/null || echo unknown ) > "$dest/llmc/COMMIT"
rm -rf "$build"
python3 "$root/scripts/real/make_tokens.py" llmc "$dest/llmc/data" --tokens $((1 << 21))

cp "$nanogpt_src"/{train.py,model.py,configurator.py} "$dest/nanogpt/"
( cd "$nanogpt_src" && git rev-parse HEAD 2>/dev/null || echo unknown ) > "$dest/nanogpt/COMMIT"
python3 "$root/scripts/real/make_tokens.py" nanogpt "$dest/nanogpt/data/synthetic" --tokens $((1 << 21))
cp "$root/scripts/real/torch_launch.py" "$dest/nanogpt/"
du -sh "$dest"
