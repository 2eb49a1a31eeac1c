// Source of the golden PTX and fatbins in this folder (tests/probe_ptx.rs). Regenerate with
// scripts/probe-golden.sh. Covers what the probe engine's parser, pruner and injector meet
// in nvcc output: mangled template kernels, a non-inlined device function, __device__ and
// __constant__ globals, shared memory, vector loads, atomics and early returns.
#include <cstdint>

__device__ float g_scale = 2.0f;
__constant__ float c_table[16];
__device__ unsigned long long g_unused[4];

__device__ __noinline__ float mix(float a, float b) {
    return a * g_scale + b * c_table[threadIdx.x & 15];
}

template <typename T>
__global__ void saxpy(T* y, const T* x, T a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = a * x[i] + y[i];
}

__global__ void mixer(float* out, const float4* in, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 v = in[i];
    tile[threadIdx.x] = mix(v.x + v.y, v.z + v.w);
    __syncthreads();
    out[i] = tile[(threadIdx.x + 1) % blockDim.x];
}

__global__ void histogram(unsigned* bins, const uint8_t* data, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        atomicAdd(&bins[data[i]], 1u);
    }
}

__global__ void unused_kernel(unsigned long long* p) { p[0] = g_unused[threadIdx.x & 3]; }

template __global__ void saxpy<float>(float*, const float*, float, int);
template __global__ void saxpy<double>(double*, const double*, double, int);
