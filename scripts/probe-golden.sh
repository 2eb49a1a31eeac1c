#!/usr/bin/env bash
# Regenerates the golden PTX and fatbins of tests/data/ptx/ (tests/probe_ptx.rs).
# Needs CUDA 13.0's nvcc (the pip packages nvidia-cuda-nvcc, nvidia-nvvm, nvidia-cuda-crt and
# nvidia-cuda-runtime, version 13.0.*, unpacked, work: put their nvidia/cu13/bin on PATH) and,
# for the Triton file, a Python with triton 3.5 (no GPU needed: it compiles for sm_90).
set -euo pipefail
cd "$(dirname "$0")/../tests/data/ptx"
nvcc -arch=sm_90 -ptx probe_kernels.cu -o probe_kernels_sm90.ptx
nvcc -arch=sm_90 -ptx ../../../examples/workloads/kernels.cu -o workloads_kernels_sm90.ptx
both=(-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90)
nvcc -fatbin "${both[@]}" --no-compress probe_kernels.cu -o probe_kernels_nocompress.fatbin
nvcc -fatbin "${both[@]}" probe_kernels.cu -o probe_kernels_default.fatbin
nvcc -fatbin -gencode arch=compute_90,code=sm_90 probe_kernels.cu -o probe_kernels_sass_only.fatbin
# A host object, as a program built with nvcc carries its fatbins (section .nv_fatbin).
nvcc -c "${both[@]}" probe_kernels.cu -o probe_kernels_host.o
python triton_fused.py
# The .file line names the script by absolute path: keep the file name only.
sed -i 's|^\(\s*\.file\s*1\s*\)".*/triton_fused.py"|\1"triton_fused.py"|' triton_fused_sm90.ptx
