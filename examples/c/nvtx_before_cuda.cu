// NVTX ranges pushed before the program's first CUDA call, for `gmprof run`: no gmprof
// header or library, only NVTX (header-only NVTX 3, shipped with the CUDA toolkit).
//
//   nvcc -O2 -arch=native -o nvtx_before_cuda examples/c/nvtx_before_cuda.cu
//   gmprof run --mode trace -o out -- ./nvtx_before_cuda
//
// "before cuda" and "before cuda/init" are pushed before any CUDA call, so CUDA initializes
// inside them; "init" holds 1 kernel (fill) and "before cuda" 3 in all (fill and 2 scales).
// "after cuda" is pushed once CUDA is up and holds 2 kernels (2 scales). gmprof must report
// the three ranges with those kernels, and no warning. The program checks the result.
#include <cmath>
#include <cstdio>
#include <nvtx3/nvToolsExt.h>
#include <cuda_runtime.h>

__global__ void fill(float* x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}

__global__ void scale(float* x, float k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= k;
}

#define CUDA(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e)); return 1; } } while (0)

int main() {
    const int n = 1 << 20, threads = 256, blocks = (n + threads - 1) / threads;
    float* x = nullptr;
    nvtxRangePushA("before cuda");  // before any CUDA call
    nvtxRangePushA("init");
    CUDA(cudaMalloc(&x, n * sizeof(float)));  // CUDA initializes here
    fill<<<blocks, threads>>>(x, 1.0f, n);
    CUDA(cudaGetLastError());
    nvtxRangePop();  // init
    scale<<<blocks, threads>>>(x, 2.0f, n);
    scale<<<blocks, threads>>>(x, 3.0f, n);
    CUDA(cudaDeviceSynchronize());
    nvtxRangePop();  // before cuda

    nvtxRangePushA("after cuda");
    scale<<<blocks, threads>>>(x, 0.5f, n);
    scale<<<blocks, threads>>>(x, 4.0f, n);
    CUDA(cudaDeviceSynchronize());
    nvtxRangePop();  // after cuda

    float first = 0.0f, last = 0.0f;
    CUDA(cudaMemcpy(&first, x, sizeof(float), cudaMemcpyDeviceToHost));
    CUDA(cudaMemcpy(&last, x + n - 1, sizeof(float), cudaMemcpyDeviceToHost));
    CUDA(cudaFree(x));
    const bool ok = std::fabs(first - 12.0f) < 1e-6f && std::fabs(last - 12.0f) < 1e-6f;
    std::printf("nvtx_before_cuda: x = %g .. %g, expected 12: %s\n", first, last, ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
