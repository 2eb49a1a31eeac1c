// Raw-CUPTI floor for gmprof's user-replay modes: what CUPTI's range profiler itself costs
// with user ranges and user replay, with none of gmprof's code. Build and run on the GPU
// machine:
//
//   nvcc -O2 -std=c++17 -o range_floor bench/range_floor.cu -I$CUDA_HOME/extras/CUPTI/include \
//        -L$CUDA_HOME/extras/CUPTI/lib64 -lcupti -lcuda
//   ./range_floor KERNELS ELEMENTS [METRIC,...]
//
// For each configuration it prints the wall time of KERNELS vector adds (first launch to
// device idle, all passes) next to an unprofiled run of the same launches in the same
// process:
//   per_range  one user range around all launches (gmprof's per_range with one range);
//   per_kernel one user range per launch, pushed before and popped after it, from the
//              launching code;
//   per_kernel_cb          the same ranges pushed and popped in CUPTI's launch callbacks
//              (enter and exit of cudaLaunchKernel; cuLaunchKernel subscribed too), named by
//              the correlation id: how gmprof does it;
//   per_kernel_cb_activity per_kernel_cb plus kernel activity records
//              (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, read and discarded): everything
//              gmprof's per_kernel mode asks of CUPTI, so the raw floor to compare it with.
// With a metric set of P passes the launches run P times (user replay), as gmprof's
// closure replay does. The first Start of a process costs about 1.5 s once, so each
// configuration is run twice and the second is reported.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <cupti.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CHECK_CUDA(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)
#define CHECK_CUPTI(x) do { CUptiResult r = (x); if (r != CUPTI_SUCCESS) { const char* s; cuptiGetResultString(r, &s); std::printf("%s: %s\n", #x, s); std::exit(1); } } while (0)

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

using Clock = std::chrono::steady_clock;

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

struct Setup {
    CUpti_RangeProfiler_Object* object = nullptr;
    std::vector<uint8_t> config, counter_data;
    size_t passes = 0;
};

static Setup setup(CUcontext ctx, const std::vector<const char*>& metrics, size_t max_ranges) {
    Setup s;
    CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CHECK_CUPTI(cuptiProfilerInitialize(&init));
    CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = 0;
    CHECK_CUPTI(cuptiDeviceGetChipName(&chip));
    CUpti_Profiler_GetCounterAvailability_Params avail = {CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    avail.ctx = ctx;
    CHECK_CUPTI(cuptiProfilerGetCounterAvailability(&avail));
    std::vector<uint8_t> availability(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = availability.data();
    CHECK_CUPTI(cuptiProfilerGetCounterAvailability(&avail));

    CUpti_Profiler_Host_Initialize_Params host = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host.pChipName = chip.pChipName;
    host.pCounterAvailabilityImage = availability.data();
    CHECK_CUPTI(cuptiProfilerHostInitialize(&host));
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = host.pHostObject;
    add.ppMetricNames = const_cast<const char**>(metrics.data());
    add.numMetrics = metrics.size();
    CHECK_CUPTI(cuptiProfilerHostConfigAddMetrics(&add));
    CUpti_Profiler_Host_GetConfigImageSize_Params size = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    size.pHostObject = host.pHostObject;
    CHECK_CUPTI(cuptiProfilerHostGetConfigImageSize(&size));
    s.config.resize(size.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params image = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    image.pHostObject = host.pHostObject;
    image.configImageSize = s.config.size();
    image.pConfigImage = s.config.data();
    CHECK_CUPTI(cuptiProfilerHostGetConfigImage(&image));
    CUpti_Profiler_Host_GetNumOfPasses_Params passes = {CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    passes.configImageSize = s.config.size();
    passes.pConfigImage = s.config.data();
    CHECK_CUPTI(cuptiProfilerHostGetNumOfPasses(&passes));
    s.passes = passes.numOfPasses;

    CUpti_RangeProfiler_Enable_Params enable = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    enable.ctx = ctx;
    CHECK_CUPTI(cuptiRangeProfilerEnable(&enable));
    s.object = enable.pRangeProfilerObject;
    CUpti_RangeProfiler_GetCounterDataSize_Params cds = {CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    cds.pRangeProfilerObject = s.object;
    cds.pMetricNames = const_cast<const char**>(metrics.data());
    cds.numMetrics = metrics.size();
    cds.maxNumOfRanges = max_ranges;
    cds.maxNumRangeTreeNodes = max_ranges;
    CHECK_CUPTI(cuptiRangeProfilerGetCounterDataSize(&cds));
    s.counter_data.resize(cds.counterDataSize);
    return s;
}

static void configure(Setup& s, size_t max_ranges) {
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params ini = {CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    ini.pRangeProfilerObject = s.object;
    ini.counterDataSize = s.counter_data.size();
    ini.pCounterData = s.counter_data.data();
    CHECK_CUPTI(cuptiRangeProfilerCounterDataImageInitialize(&ini));
    CUpti_RangeProfiler_SetConfig_Params cfg = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    cfg.pRangeProfilerObject = s.object;
    cfg.configSize = s.config.size();
    cfg.pConfig = s.config.data();
    cfg.counterDataImageSize = s.counter_data.size();
    cfg.pCounterDataImage = s.counter_data.data();
    cfg.range = CUPTI_UserRange;
    cfg.replayMode = CUPTI_UserReplay;
    cfg.maxRangesPerPass = max_ranges;
    cfg.numNestingLevels = 1;
    cfg.minNestingLevel = 1;
    cfg.passIndex = 0;
    cfg.targetNestingLevel = 1;
    CHECK_CUPTI(cuptiRangeProfilerSetConfig(&cfg));
}

static void push(Setup& s, const char* name) {
    CUpti_RangeProfiler_PushRange_Params p = {CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = s.object;
    p.pRangeName = name;
    CHECK_CUPTI(cuptiRangeProfilerPushRange(&p));
}
static void pop(Setup& s) {
    CUpti_RangeProfiler_PopRange_Params p = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = s.object;
    CHECK_CUPTI(cuptiRangeProfilerPopRange(&p));
}

static Setup* callback_setup = nullptr;
// Pushes at the runtime launch's enter, pops at its exit; the nested driver call is ignored.
static void CUPTIAPI on_launch(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API || callback_setup == nullptr) return;
    auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (cb->callbackSite == CUPTI_API_ENTER) {
        char name[16];
        std::snprintf(name, sizeof name, "%u", cb->correlationId);
        push(*callback_setup, name);
    } else {
        pop(*callback_setup);
    }
}

int main(int argc, char** argv) {
    const int kernels = argc > 1 ? std::atoi(argv[1]) : 2000;
    const int n = argc > 2 ? std::atoi(argv[2]) : (1 << 24);
    std::vector<std::string> names;
    std::string list = argc > 3 ? argv[3] : "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum";
    for (size_t at = 0; at <= list.size();) {
        size_t comma = list.find(',', at);
        if (comma == std::string::npos) comma = list.size();
        names.push_back(list.substr(at, comma - at));
        at = comma + 1;
    }
    std::vector<const char*> metrics;
    for (auto& m : names) metrics.push_back(m.c_str());
    float *a, *b, *c;
    CHECK_CUDA(cudaMalloc(&a, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&b, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&c, n * sizeof(float)));
    CHECK_CUDA(cudaDeviceSynchronize());
    CUcontext ctx;
    cuCtxGetCurrent(&ctx);
    const int threads = 256, blocks = (n + threads - 1) / threads;
    auto launches = [&](bool per_kernel, Setup* s) {
        char name[32];
        for (int i = 0; i < kernels; ++i) {
            if (per_kernel) { std::snprintf(name, sizeof name, "%d", i); push(*s, name); }
            vector_add<<<blocks, threads>>>(a, b, c, n);
            if (per_kernel) pop(*s);
        }
    };
    auto unprofiled = [&] {
        auto t0 = Clock::now();
        launches(false, nullptr);
        CHECK_CUDA(cudaDeviceSynchronize());
        return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    };
    unprofiled();  // warm-up
    Setup s = setup(ctx, metrics, kernels + 1);
    CUpti_SubscriberHandle sub = nullptr;
    CHECK_CUPTI(cuptiSubscribe(&sub, on_launch, nullptr));
    CHECK_CUPTI(cuptiActivityRegisterCallbacks(requested, completed));
    for (const char* mode : {"per_range", "per_kernel", "per_kernel_cb", "per_kernel_cb_activity"}) {
        bool per_kernel = std::strcmp(mode, "per_kernel") == 0;
        bool in_callbacks = std::strncmp(mode, "per_kernel_cb", 13) == 0;
        bool activity = std::strcmp(mode, "per_kernel_cb_activity") == 0;
        if (in_callbacks) {
            callback_setup = &s;
            CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
            CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
        }
        if (activity) CHECK_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        double profiled = 0;
        for (int round = 0; round < 2; ++round) {
            configure(s, kernels + 1);
            auto t0 = Clock::now();
            size_t pass = 0;
            for (;; ++pass) {
                CUpti_RangeProfiler_Start_Params start = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
                start.pRangeProfilerObject = s.object;
                CHECK_CUPTI(cuptiRangeProfilerStart(&start));
                if (!per_kernel && !in_callbacks) push(s, "all");
                launches(per_kernel, &s);
                if (!per_kernel && !in_callbacks) pop(s);
                CHECK_CUDA(cudaDeviceSynchronize());
                CUpti_RangeProfiler_Stop_Params stop = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
                stop.pRangeProfilerObject = s.object;
                CHECK_CUPTI(cuptiRangeProfilerStop(&stop));
                if (stop.isAllPassSubmitted) break;
            }
            profiled = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
            CUpti_RangeProfiler_DecodeData_Params decode = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
            decode.pRangeProfilerObject = s.object;
            CHECK_CUPTI(cuptiRangeProfilerDecodeData(&decode));
            if (decode.numOfRangeDropped) std::printf("dropped %zu ranges\n", decode.numOfRangeDropped);
        }
        if (activity) {
            CHECK_CUPTI(cuptiActivityFlushAll(1));
            CHECK_CUPTI(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        }
        if (in_callbacks) {
            CHECK_CUPTI(cuptiEnableCallback(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
            CHECK_CUPTI(cuptiEnableCallback(0, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
            callback_setup = nullptr;
        }
        double base = unprofiled();
        std::printf("range_floor mode=%s kernels=%d elements=%d passes=%zu unprofiled_ms=%.3f profiled_ms=%.3f ratio=%.3f\n",
                    mode, kernels, n, s.passes, base, profiled, profiled / base);
    }
    return 0;
}
