// Raw-CUPTI floor for gmprof's trace mode: what CUPTI itself costs on a launch-bound
// workload, with none of gmprof's code. Build and run on the GPU machine:
//
//   nvcc -O2 -o cupti_floor bench/cupti_floor.cu -I$CUDA_HOME/extras/CUPTI/include \
//        -L$CUDA_HOME/extras/CUPTI/lib64 -lcupti
//   ./cupti_floor KERNELS ELEMENTS     (prints one line per configuration)
//
// Configurations, each timed in the same process against an unprofiled run of the same
// launches: kernel activity records only (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), launch
// callbacks only (cuptiSubscribe + cuLaunchKernel/cudaLaunchKernel callbacks, empty
// handler), and both.
#include <cuda_runtime.h>
#include <cupti.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)
#define CHECK_CUPTI(x) do { CUptiResult r = (x); if (r != CUPTI_SUCCESS) { const char* s; cuptiGetResultString(r, &s); std::printf("%s: %s\n", #x, s); std::exit(1); } } while (0)

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

static std::vector<void*> pool;
static size_t records = 0;
static void CUPTIAPI requested(uint8_t** buf, size_t* size, size_t* max) {
    *size = 8 << 20;
    if (pool.empty()) { void* p = nullptr; if (posix_memalign(&p, 8, *size) != 0) std::abort(); pool.push_back(p); }
    *buf = static_cast<uint8_t*>(pool.back()); pool.pop_back(); *max = 0;
}
static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
    CUpti_Activity* r = nullptr;
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) records++;
    pool.push_back(buf);
}
static void CUPTIAPI on_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

static double run(int kernels, int n, float* a, float* b, float* c) {
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < kernels; ++k) vector_add<<<(n + 255) / 256, 256>>>(a, b, c, n);
    CHECK_CUDA(cudaDeviceSynchronize());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int main(int argc, char** argv) {
    int kernels = argc > 1 ? std::atoi(argv[1]) : 2000;
    int n = argc > 2 ? std::atoi(argv[2]) : (1 << 20);
    float *a, *b, *c;
    CHECK_CUDA(cudaMalloc(&a, n * 4)); CHECK_CUDA(cudaMalloc(&b, n * 4)); CHECK_CUDA(cudaMalloc(&c, n * 4));
    for (int i = 0; i < 8; ++i) {
        void* p = nullptr;
        if (posix_memalign(&p, 8, 8 << 20) != 0) std::abort();
        pool.push_back(p);
    }
    run(10, n, a, b, c);  // warm-up: module load
    const char* names[] = {"activity", "callbacks", "activity+callbacks"};
    for (int cfg = 0; cfg < 3; ++cfg) {
        for (int rep = 0; rep < 3; ++rep) {
            double base = run(kernels, n, a, b, c);
            CUpti_SubscriberHandle sub = nullptr;
            if (cfg != 1) {
                CHECK_CUPTI(cuptiActivityRegisterCallbacks(requested, completed));
                CHECK_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
            }
            if (cfg != 0) {
                CHECK_CUPTI(cuptiSubscribe(&sub, on_callback, nullptr));
                CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
                CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
            }
            double profiled = run(kernels, n, a, b, c);
            if (cfg != 1) {
                CHECK_CUPTI(cuptiActivityFlushAll(1));
                CHECK_CUPTI(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
            }
            if (sub) CHECK_CUPTI(cuptiUnsubscribe(sub));
            std::printf("cupti_floor config=%s kernels=%d elements=%d unprofiled_ms=%.3f profiled_ms=%.3f ratio=%.3f\n",
                        names[cfg], kernels, n, base, profiled, profiled / base);
        }
    }
    std::printf("activity records read: %zu\n", records);
    return 0;
}
