// The flight recorder's acceptance program (issue 42): STEPS steps (default 6000), each a
// "step" NVTX range around "forward" (two kernels of about 1 ms together) and a synchronize;
// step SLOW (default 3000) also runs `spin` for about 200 ms of extra GPU work, in "forward".
//
//   nvcc -O2 -arch=sm_90 -o flight_slow_step examples/c/flight_slow_step.cu
//   gmprof run --slow-step 3x -o out -- ./flight_slow_step 6000 3000
//
// Expected: one window, out/window-0/, holding step SLOW with the `spin` kernel's row; the
// steps table (out/steps/) marks its steps in `flight_window`; no other window. With SLOW -1
// there is no slow step and no window.
#include <cstdio>
#include <cstdlib>
#include <nvtx3/nvToolsExt.h>
#include <cuda_runtime.h>

__device__ unsigned long long globaltimer_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Spins for `ns` of the GPU's global timer on one thread: GPU time without memory traffic.
__global__ void spin(unsigned long long ns) {
    unsigned long long start = globaltimer_ns();
    while (globaltimer_ns() - start < ns) {
    }
}

__global__ void saxpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

#define CUDA(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e)); return 1; } } while (0)

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 6000;
    const int slow = argc > 2 ? std::atoi(argv[2]) : 3000;
    const int n = 1 << 24, threads = 256, blocks = (n + threads - 1) / threads;
    const unsigned long long extra = 200ull * 1000 * 1000; // 200 ms
    float *x, *y;
    CUDA(cudaMalloc(&x, n * sizeof(float)));
    CUDA(cudaMalloc(&y, n * sizeof(float)));
    CUDA(cudaMemset(x, 0, n * sizeof(float)));
    CUDA(cudaMemset(y, 0, n * sizeof(float)));
    for (int s = 0; s < steps; ++s) {
        nvtxRangePushA("step");
        nvtxRangePushA("forward");
        saxpy<<<blocks, threads>>>(y, x, 0.5f, n);
        saxpy<<<blocks, threads>>>(x, y, 2.0f, n);
        if (s == slow) spin<<<1, 1>>>(extra);
        nvtxRangePop();
        CUDA(cudaDeviceSynchronize());
        nvtxRangePop();
    }
    std::printf("flight_slow_step: %d steps, slow step %d, %d kernels\n", steps, slow,
                2 * steps + (slow >= 0 && slow < steps ? 1 : 0));
    return 0;
}
