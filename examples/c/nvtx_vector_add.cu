// An unmodified CUDA program for `gmprof run`: no gmprof header, no gmprof library, only
// NVTX ranges (header-only NVTX 3, shipped with the CUDA toolkit).
//
//   nvcc -O2 -o nvtx_vector_add examples/c/nvtx_vector_add.cu
//   gmprof run --metrics dram__bytes_read.sum,dram__bytes_write.sum -o out -- ./nvtx_vector_add 5
//
// Each of STEPS steps (default 5) runs, inside "step", a vector add over 2^24 floats in
// "add" (reads 2 x 64 MiB, writes 64 MiB) and a scale in "scale" (reads and writes
// 64 MiB), so a profiler must report 2 kernels per step and those DRAM bytes. Finishes
// with a range left open on purpose: gmprof closes it at exit and says so.
#include <cstdio>
#include <cstdlib>
#include <nvtx3/nvToolsExt.h>
#include <cuda_runtime.h>

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

__global__ void scale(float* c, float k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] *= k;
}

#define CUDA(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e)); return 1; } } while (0)

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 5;
    const int n = 1 << (argc > 2 ? std::atoi(argv[2]) : 24), threads = 256, blocks = (n + threads - 1) / threads;
    float *a, *b, *c;
    nvtxRangePushA("setup");
    CUDA(cudaMalloc(&a, n * sizeof(float)));
    CUDA(cudaMalloc(&b, n * sizeof(float)));
    CUDA(cudaMalloc(&c, n * sizeof(float)));
    CUDA(cudaMemset(a, 0, n * sizeof(float)));
    CUDA(cudaMemset(b, 0, n * sizeof(float)));
    nvtxRangePop();
    for (int s = 0; s < steps; ++s) {
        nvtxRangePushA("step");
        nvtxRangePushA("add");
        vector_add<<<blocks, threads>>>(a, b, c, n);
        nvtxRangePop();
        nvtxRangePushA("scale");
        scale<<<blocks, threads>>>(c, 0.5f, n);
        nvtxRangePop();
        CUDA(cudaDeviceSynchronize());
        nvtxRangePop();
    }
    nvtxRangePushA("left open");
    scale<<<blocks, threads>>>(c, 2.0f, n);
    CUDA(cudaDeviceSynchronize());
    std::printf("nvtx_vector_add: %d steps, %d kernels\n", steps, 2 * steps + 1);
    return 0;
}
