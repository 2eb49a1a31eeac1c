// Raw-CUPTI floor for gmprof's trace mode: what CUPTI itself costs on a launch-bound
// workload, with none of gmprof's code. Build and run on the GPU machine:
//
//   nvcc -O2 -o cupti_floor bench/cupti_floor.cu -I$CUDA_HOME/extras/CUPTI/include \
//        -L$CUDA_HOME/extras/CUPTI/lib64 -lcupti -lcuda
//   ./cupti_floor KERNELS ELEMENTS [runtime|driver]   (one line per configuration and repeat)
//   ./cupti_floor clock                                (what one timestamp costs: see clock_costs)
//   ./cupti_floor KERNELS ELEMENTS driver|runtime gmprof
//       gmprof's trace mode itself, in this program and on this launch path: libgmprof.so
//       (its path in $GMPROF_LIBRARY) is opened with dlopen, and gmprof_init (mode "trace")
//       and gmprof_finish bracket each profiled run (finish, which writes the outputs into
//       $GMPROF_FLOOR_OUT/rep-N, is not timed). The floor and gmprof are then timed alike.
// $FLOOR_REPS sets the repeats of each configuration (default 3).
//
// Configurations, each timed in the same process against an unprofiled run of the same
// launches: kernel activity records only (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), launch
// callbacks only (cuptiSubscribe + cuLaunchKernel/cudaLaunchKernel callbacks, empty
// handler), both, and `gmprof-setup`: everything gmprof's trace mode enables, with empty
// handlers (kernel, memcpy and memset activity; kernel and graph launch callbacks and every
// memcpy/memset callback of both API domains, found by name as gmprof finds them; graph-node
// and context resource callbacks). The third argument launches through the runtime
// (`<<<>>>`, the default) or straight through cuLaunchKernel, as cudarc (gmprof's examples)
// does, so that the floor and `synthetic` time the same launch path.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <time.h>
#include <dlfcn.h>
#include <x86intrin.h>

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

// The callbacks gmprof's trace mode enables (src/checked/callback.rs, src/capture/hub.rs).
static void enable_like_gmprof(CUpti_SubscriberHandle sub) {
    const CUpti_CallbackId driver_launches[] = {
        CUPTI_DRIVER_TRACE_CBID_cuLaunch, CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid, CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};
    const CUpti_CallbackId runtime_launches[] = {
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000};
    for (CUpti_CallbackId id : driver_launches) CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id));
    for (CUpti_CallbackId id : runtime_launches) CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id));
    // Every memcpy and memset callback, by name.
    const struct { CUpti_CallbackDomain domain; uint32_t size; } domains[] = {
        {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE}, {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE}};
    for (auto d : domains) {
        for (uint32_t id = 1; id < d.size; ++id) {
            const char* name = nullptr;
            if (cuptiGetCallbackName(d.domain, id, &name) != CUPTI_SUCCESS || name == nullptr) continue;
            if (std::strstr(name, "Memcpy") || std::strstr(name, "Memset")) cuptiEnableCallback(1, sub, d.domain, id);
        }
    }
    CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
    CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));
    CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED));
    CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED));
}

static bool driver_launch = false;
static CUfunction driver_function = nullptr;

static double run(int kernels, int n, float* a, float* b, float* c) {
    auto t0 = std::chrono::steady_clock::now();
    if (driver_launch) {
        void* args[] = {&a, &b, &c, &n};
        for (int k = 0; k < kernels; ++k) {
            CUresult r = cuLaunchKernel(driver_function, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
            if (r != CUDA_SUCCESS) { std::printf("cuLaunchKernel: %d\n", (int)r); std::exit(1); }
        }
    } else {
        for (int k = 0; k < kernels; ++k) vector_add<<<(n + 255) / 256, 256>>>(a, b, c, n);
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The cost of one read of each clock a launch callback could stamp a launch with: CUPTI's
// own timestamp (the activity records' clock), clock_gettime and the TSC. On a virtual
// machine clock_gettime may leave the vDSO for a system call, which a per-launch stamp pays.
static void clock_costs() {
    const int reps = 1000000;
    uint64_t sink = 0;
    auto time_it = [&](const char* name, auto read) {
        for (int i = 0; i < 1000; ++i) sink += read();
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) sink += read();
        double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / reps;
        std::printf("cupti_floor clock=%s ns_per_read=%.1f\n", name, ns);
    };
    time_it("cuptiGetTimestamp", [] { uint64_t t = 0; cuptiGetTimestamp(&t); return t; });
    time_it("CLOCK_MONOTONIC", [] { timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return (uint64_t)ts.tv_nsec; });
    time_it("CLOCK_MONOTONIC_RAW", [] { timespec ts; clock_gettime(CLOCK_MONOTONIC_RAW, &ts); return (uint64_t)ts.tv_nsec; });
    time_it("rdtsc", [] { return (uint64_t)__rdtsc(); });
    std::printf("cupti_floor clock sink=%llu\n", (unsigned long long)(sink & 1));
}

static int reps() {
    const char* r = std::getenv("FLOOR_REPS");
    return r && std::atoi(r) > 0 ? std::atoi(r) : 3;
}

// gmprof's C ABI (include/gmprof.h), looked up at run time so that this file builds alone.
struct GmprofOptions { const char* mode; const char* metrics; const char* output_dir; int device; int synchronize_on_pop; };
using GmprofInit = int (*)(const GmprofOptions*);
using GmprofFinish = int (*)();
using GmprofLastError = const char* (*)();

static int gmprof_config(int kernels, int n, float* a, float* b, float* c) {
    const char* path = std::getenv("GMPROF_LIBRARY");
    void* lib = path ? dlopen(path, RTLD_NOW) : nullptr;
    if (!lib) { std::printf("gmprof: set GMPROF_LIBRARY to libgmprof.so (%s)\n", path ? dlerror() : "unset"); return 1; }
    auto init = (GmprofInit)dlsym(lib, "gmprof_init");
    auto finish = (GmprofFinish)dlsym(lib, "gmprof_finish");
    auto last_error = (GmprofLastError)dlsym(lib, "gmprof_last_error");
    if (!init || !finish || !last_error) { std::printf("gmprof: symbols missing in %s\n", path); return 1; }
    const char* out = std::getenv("GMPROF_FLOOR_OUT") ? std::getenv("GMPROF_FLOOR_OUT") : "/tmp/cupti_floor_gmprof";
    for (int rep = 0; rep < reps(); ++rep) {
        double base = run(kernels, n, a, b, c);
        char dir[4096];
        std::snprintf(dir, sizeof dir, "%s/rep-%d", out, rep);
        GmprofOptions opts = {"trace", nullptr, dir, -1, 0};
        if (init(&opts) != 0) { std::printf("gmprof_init: %s\n", last_error()); return 1; }
        double profiled = run(kernels, n, a, b, c);
        if (finish() != 0) { std::printf("gmprof_finish: %s\n", last_error()); return 1; }
        std::printf("cupti_floor config=gmprof launch=%s kernels=%d elements=%d unprofiled_ms=%.3f profiled_ms=%.3f ratio=%.3f\n",
                    driver_launch ? "driver" : "runtime", kernels, n, base, profiled, profiled / base);
    }
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "clock") == 0) {
        clock_costs();
        return 0;
    }
    bool with_gmprof = argc > 4 && std::strcmp(argv[4], "gmprof") == 0;
    int kernels = argc > 1 ? std::atoi(argv[1]) : 2000;
    int n = argc > 2 ? std::atoi(argv[2]) : (1 << 20);
    driver_launch = argc > 3 && std::strcmp(argv[3], "driver") == 0;
    float *a, *b, *c;
    CHECK_CUDA(cudaMalloc(&a, n * 4)); CHECK_CUDA(cudaMalloc(&b, n * 4)); CHECK_CUDA(cudaMalloc(&c, n * 4));
    for (int i = 0; i < 8; ++i) {
        void* p = nullptr;
        if (posix_memalign(&p, 8, 8 << 20) != 0) std::abort();
        pool.push_back(p);
    }
    {
        cudaFunction_t f = nullptr;
        CHECK_CUDA(cudaGetFuncBySymbol(&f, (const void*)vector_add));
        driver_function = (CUfunction)f;
    }
    run(10, n, a, b, c);  // warm-up: module load
    if (with_gmprof) return gmprof_config(kernels, n, a, b, c);
    const char* names[] = {"activity", "callbacks", "activity+callbacks", "gmprof-setup"};
    const CUpti_ActivityKind gmprof_kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMSET};
    for (int cfg = 0; cfg < 4; ++cfg) {
        for (int rep = 0; rep < reps(); ++rep) {
            double base = run(kernels, n, a, b, c);
            CUpti_SubscriberHandle sub = nullptr;
            if (cfg != 1) {
                CHECK_CUPTI(cuptiActivityRegisterCallbacks(requested, completed));
                for (int k = 0; k < (cfg == 3 ? 3 : 1); ++k) CHECK_CUPTI(cuptiActivityEnable(gmprof_kinds[k]));
            }
            if (cfg == 1 || cfg == 2) {
                CHECK_CUPTI(cuptiSubscribe(&sub, on_callback, nullptr));
                CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
                CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
            }
            if (cfg == 3) {
                CHECK_CUPTI(cuptiSubscribe(&sub, on_callback, nullptr));
                enable_like_gmprof(sub);
            }
            double profiled = run(kernels, n, a, b, c);
            if (cfg != 1) {
                CHECK_CUPTI(cuptiActivityFlushAll(1));
                for (int k = 0; k < (cfg == 3 ? 3 : 1); ++k) CHECK_CUPTI(cuptiActivityDisable(gmprof_kinds[k]));
            }
            if (sub) CHECK_CUPTI(cuptiUnsubscribe(sub));
            std::printf("cupti_floor config=%s launch=%s kernels=%d elements=%d unprofiled_ms=%.3f profiled_ms=%.3f ratio=%.3f\n",
                        names[cfg], driver_launch ? "driver" : "runtime", kernels, n, base, profiled, profiled / base);
        }
    }
    std::printf("activity records read: %zu\n", records);
    return 0;
}
