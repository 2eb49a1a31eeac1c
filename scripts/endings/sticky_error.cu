// A CUDA program whose kernel fails the context with a "sticky" error in its fourth NVTX
// step, as nanoGPT's illegal instruction did: gmprof must still write every output, with the
// CUDA error and the kernels that never completed.
//   nvcc -O2 -arch=sm_90 -o sticky_error scripts/endings/sticky_error.cu
//   sticky_error [address|trap|brkpt]
// address: a store through a null pointer (CUDA_ERROR_ILLEGAL_ADDRESS, 700); trap: the PTX
// `trap` instruction; brkpt: the PTX `brkpt` instruction without a debugger. Steps 0-2 run
// four `scale` kernels each and complete; step 3 runs `scale`, the failing kernel and two
// `after_fault` kernels queued behind it, then synchronizes, prints the error and exits 1.
#include <cstdio>
#include <cstring>
#include <nvtx3/nvToolsExt.h>
#include <cuda_runtime.h>

__global__ void scale(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 0.5f + 1.f;
}

__global__ void fault_address(float* nowhere) {
    if (threadIdx.x == 0) nowhere[blockIdx.x] = 1.f;
}

__global__ void fault_trap(float* x) {
    if (threadIdx.x == 0) asm volatile("trap;");
    x[threadIdx.x] += 1.f;
}

__global__ void fault_brkpt(float* x) {
    if (threadIdx.x == 0) asm volatile("brkpt;");
    x[threadIdx.x] += 1.f;
}

__global__ void after_fault(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 2.f;
}

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "address";
    const int n = 1 << 22;
    float* x;
    cudaMalloc(&x, n * sizeof(float));
    cudaMemset(x, 0, n * sizeof(float));
    const int blocks = (n + 255) / 256;
    for (int step = 0; step < 3; ++step) {
        nvtxRangePushA("step");
        for (int k = 0; k < 4; ++k) scale<<<blocks, 256>>>(x, n);
        cudaDeviceSynchronize();
        nvtxRangePop();
    }
    nvtxRangePushA("step");
    scale<<<blocks, 256>>>(x, n);
    if (std::strcmp(how, "trap") == 0) {
        fault_trap<<<1, 32>>>(x);
    } else if (std::strcmp(how, "brkpt") == 0) {
        fault_brkpt<<<1, 32>>>(x);
    } else {
        fault_address<<<1, 32>>>(nullptr);
    }
    after_fault<<<blocks, 256>>>(x, n);
    after_fault<<<blocks, 256>>>(x, n);
    cudaError_t err = cudaDeviceSynchronize();
    std::fprintf(stderr, "sticky_error: %s: %s (%d)\n", how, cudaGetErrorString(err), (int)err);
    return err == cudaSuccess ? 0 : 1;
}
