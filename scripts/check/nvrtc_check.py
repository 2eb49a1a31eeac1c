"""Compiles include/gmprof_device.cuh with NVRTC (no standard includes), through ctypes.

    python3 scripts/check/nvrtc_check.py include/gmprof_device.cuh [arch]
"""

import ctypes
import ctypes.util
import glob
import sys

header = open(sys.argv[1], "rb").read()
arch = sys.argv[2] if len(sys.argv) > 2 else "compute_90"
src = b"""
#include "gmprof_device.cuh"
extern "C" __global__ void k(float *x, unsigned long long *timers) {
    gmprof_dt_lane t = gmprof_dt_init_block(timers);
    gmprof_dt_lane w = gmprof_dt_init_warp(timers, 2, 2);
    gmprof_dt_lane g = gmprof_dt_init_group(timers, 2, threadIdx.x / 128, threadIdx.x % 128 == 0);
    gmprof_dt_begin(t, 1, 64);
    x[threadIdx.x] *= 2.f;
    gmprof_dt_end(t, 1);
    gmprof_dt_instant(w, 2, 7);
    gmprof_dt_instant(g, 3);
    gmprof_dt_finish(t);
}
"""
names = [p for d in ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib") for p in glob.glob(d + "/libnvrtc.so*")]
lib = ctypes.CDLL(names[0] if names else ctypes.util.find_library("nvrtc"))
prog = ctypes.c_void_p()
headers = (ctypes.c_char_p * 1)(header)
includes = (ctypes.c_char_p * 1)(b"gmprof_device.cuh")
rc = lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"check.cu", 1, headers, includes)
assert rc == 0, rc
opts = (ctypes.c_char_p * 2)(("--gpu-architecture=" + arch).encode(), b"-std=c++17")
rc = lib.nvrtcCompileProgram(prog, 2, opts)
size = ctypes.c_size_t()
lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
log = ctypes.create_string_buffer(size.value)
lib.nvrtcGetProgramLog(prog, log)
ptx_size = ctypes.c_size_t()
lib.nvrtcGetPTXSize(prog, ctypes.byref(ptx_size))
print("nvrtc %s: rc %d, PTX %d bytes, log: %s" % (names[0] if names else "nvrtc", rc, ptx_size.value, log.value.decode().strip() or "(empty)"))
sys.exit(0 if rc == 0 else 1)
