// A CUDA program that ends by exit(3) from a helper thread while its main thread is still
// launching kernels inside NVTX ranges: gmprof must still write its outputs.
//   nvcc -O2 -o exit_from_thread scripts/endings/exit_from_thread.cu -lpthread
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <chrono>
#include <nvtx3/nvToolsExt.h>
#include <cuda_runtime.h>

__global__ void busy(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 0.5f + 1.f;
}

int main() {
    const int n = 1 << 20;
    float* x;
    cudaMalloc(&x, n * sizeof(float));
    std::thread([] {
        std::this_thread::sleep_for(std::chrono::seconds(3));
        std::fprintf(stderr, "exit_from_thread: exit(3) from a helper thread\n");
        std::exit(3);
    }).detach();
    for (int step = 0;; ++step) {
        nvtxRangePushA("step");
        for (int k = 0; k < 10; ++k) busy<<<(n + 255) / 256, 256>>>(x, n);
        cudaDeviceSynchronize();
        nvtxRangePop();
    }
}
