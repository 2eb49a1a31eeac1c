# Sourced by the GPU validation scripts, from the repo root on the GPU machine: CUDA and
# CUPTI on the paths, the staged libgmprof.so and Python module (scripts/gpu-stage), and
# ROOT (the repo root), G (the staged gmprof command) and R (the staged real programs,
# scripts/real/stage.sh). GPU_LIB names another libgmprof.so to inject (an A/B of two builds).
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$CUDA_HOME/bin:$PATH
export LD_LIBRARY_PATH=$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
export GMPROF_LIBRARY=${GPU_LIB:-$PWD/.gpu/lib/libgmprof.so} PYTHONPATH=$PWD/.gpu/python${PYTHONPATH:+:$PYTHONPATH}
ROOT=$PWD
G=$ROOT/.gpu/bin/gmprof
R=$ROOT/${REAL:-.real}
