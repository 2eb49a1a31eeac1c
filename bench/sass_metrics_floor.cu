// What CUPTI's SASS Metrics API gives and costs, with none of gmprof's code: the metrics the
// chip offers, per-launch counts (a flush after each launch) of a kernel with known
// instruction counts and of a cuBLAS SGEMM, beside kernel activity (as gmprof's trace mode
// runs it), and what patching, the first launch and each flush cost. Build and run on the
// GPU machine:
//
//   nvcc -O2 -std=c++17 -arch=sm_90 -o sass_metrics_floor bench/sass_metrics_floor.cu \
//        -I$CUDA_HOME/extras/CUPTI/include -L$CUDA_HOME/extras/CUPTI/lib64 -lcupti -lcuda -lcublas
//   ./sass_metrics_floor list                 the chip's SASS metrics, one per line
//   ./sass_metrics_floor run METRIC[,METRIC]  collect them (lazy patching) over 3 rounds
//   ./sass_metrics_floor plain                the same launches with no CUPTI (for ncu)
//
// `run` prints, per launch: the kernel, records flushed, instances, each metric's sum over
// the records, and the time of synchronize + GetDataProperties + FlushData.
//
// Variables for the experiments behind gmprof's choices (H100, driver 580, CUPTI 13.0.1):
//   SMF_NO_ACTIVITY=1  no CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL records beside the collection
//                      (with them, every flushed value is 0; CUPTI's own sample shows that
//                      CUPTI_ACTIVITY_KIND_KERNEL keeps the counts right, and memcpy or memset
//                      records alone leave functions unpatched)
//   SMF_SERIAL=1       CUPTI_ACTIVITY_KIND_KERNEL records (serialized kernels, as gmprof's SASS
//                      path runs) instead of CONCURRENT_KERNEL
//   SMF_EAGER=1        patch at enable instead of lazily (modules loaded later stay unpatched)
//   SMF_INIT_FIRST=1   initialize the profiler API before the context exists
//   SMF_CTX_CREATE=1   a context of its own instead of the primary one
//   SMF_NO_BEFORE=1, SMF_NO_MEMSET=1, SMF_NO_BLAS=1, SMF_NO_STRUCTSIZE=1 leave steps out
//   SMF_GRAPH=N        after the rounds, capture a CUDA graph on a stream of its own (spin
//                      1000 iters, axpy, spin 500 iters, a kernel launched only inside the
//                      graph, and the SGEMM), instantiate it and launch it N times, then one
//                      flush (no flush during the capture); then N more launches with a flush
//                      after each. SMF_CAPTURE_MODE=global|thread_local|relaxed (default global).
//                      A flush that does not return within 30 s prints HANG and exits 3.
// Build with -DNO_CUBLAS for a program without cuBLAS.
#include <cuda.h>
#include <cuda_runtime.h>
#ifndef NO_CUBLAS
#include <cublas_v2.h>
#endif
#include <cupti.h>
#include <cupti_profiler_target.h>
#include <cupti_sass_metrics.h>
#include <cupti_target.h>

#include <csignal>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#define CK(x)                                                                                   \
    do {                                                                                        \
        CUptiResult r_ = (x);                                                                   \
        if (r_ != CUPTI_SUCCESS) {                                                              \
            const char* s_ = nullptr;                                                           \
            cuptiGetResultString(r_, &s_);                                                      \
            fprintf(stderr, "%s:%d %s -> %d %s\n", __FILE__, __LINE__, #x, (int)r_, s_ ? s_ : ""); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

// 1 + 4 per iteration of a loop of `iters`: a known answer to check counts against.
__global__ void spin(float* out, int iters) {
    float acc = threadIdx.x;
    for (int i = 0; i < iters; ++i) acc = acc * 1.0001f + 0.5f;
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

__global__ void axpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *size = 8 << 20;
    *buffer = (uint8_t*)aligned_alloc(8, *size);
    *max_records = 0;
}

static int kernel_records = 0;
static void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) ++kernel_records;
    free(buffer);
}

// A kernel launched only inside the CUDA graph: 2 + 3 per iteration of its loop.
__global__ void graph_only(float* out, int iters) {
    float acc = threadIdx.x;
    for (int i = 0; i < iters; ++i) acc = acc * 0.999f - 0.25f;
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

static const char* volatile watch_label = "";
static void on_alarm(int) {
    char msg[256];
    int k = snprintf(msg, sizeof msg, "HANG: %s did not return within 30 s\n", watch_label);
    if (k > 0) { ssize_t w = write(2, msg, (size_t)k); (void)w; }
    _exit(3);
}

static double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
    signal(SIGALRM, on_alarm);
    const char* what = argc > 1 ? argv[1] : "list";
    bool sass = strcmp(what, "plain") != 0;
    if (sass && getenv("SMF_INIT_FIRST")) {
        cuInit(0);
        CUpti_Profiler_Initialize_Params init{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
        CK(cuptiProfilerInitialize(&init));
        CUpti_Profiler_DeviceSupported_Params ds{CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
        ds.cuDevice = 0;
        ds.api = CUPTI_PROFILER_SASS_METRICS;
        CK(cuptiProfilerDeviceSupported(&ds));
        printf("supported %d\n", (int)ds.isSupported);
    }
    CUcontext ctx;
    if (getenv("SMF_CTX_CREATE")) {
        cuInit(0);
        CUdevice dev;
        cuDeviceGet(&dev, 0);
        CUctxCreateParams cp{};
        cuCtxCreate(&ctx, &cp, 0, dev);
    } else {
        cudaSetDevice(0);
        cudaFree(0);
        cuCtxGetCurrent(&ctx);
    }
    const char* chip = nullptr;
    std::map<uint64_t, std::string> names;
    if (sass) {
        CUpti_Profiler_Initialize_Params init{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
        CK(cuptiProfilerInitialize(&init));
        CUpti_Device_GetChipName_Params chipp{CUpti_Device_GetChipName_Params_STRUCT_SIZE};
        chipp.deviceIndex = 0;
        CK(cuptiDeviceGetChipName(&chipp));
        chip = chipp.pChipName;
        printf("chip %s\n", chip);
    }
    if (strcmp(what, "list") == 0) {
        CUpti_SassMetrics_GetNumOfMetrics_Params n{CUpti_SassMetrics_GetNumOfMetrics_Params_STRUCT_SIZE};
        n.pChipName = chip;
        CK(cuptiSassMetricsGetNumOfMetrics(&n));
        std::vector<CUpti_SassMetrics_MetricDetails> list(n.numOfMetrics);
        CUpti_SassMetrics_GetMetrics_Params g{CUpti_SassMetrics_GetMetrics_Params_STRUCT_SIZE};
        g.pChipName = chip;
        g.numOfMetrics = list.size();
        g.pMetricsList = list.data();
        CK(cuptiSassMetricsGetMetrics(&g));
        for (auto& m : list) printf("%llu\t%s\t%s\n", (unsigned long long)m.metricId, m.pMetricName, m.pMetricDescription);
        return 0;
    }
    if (sass) {
        if (!getenv("SMF_NO_ACTIVITY")) {
            CK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
            CK(cuptiActivityEnable(getenv("SMF_SERIAL") ? CUPTI_ACTIVITY_KIND_KERNEL : CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        }
        std::vector<CUpti_SassMetrics_Config> configs;
        char* list = strdup(argc > 2 ? argv[2] : "smsp__sass_inst_executed");
        for (char* m = strtok(list, ","); m; m = strtok(nullptr, ",")) {
            CUpti_SassMetrics_GetProperties_Params p{CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE};
            p.pChipName = chip;
            p.pMetricName = m;
            CK(cuptiSassMetricsGetProperties(&p));
            configs.push_back({p.metric.metricId, CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU});
            names[p.metric.metricId] = m;
        }
        CUpti_SassMetricsSetConfig_Params sc{CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE};
        sc.numOfMetricConfig = configs.size();
        sc.pConfigs = configs.data();
        sc.deviceIndex = 0;
        CK(cuptiSassMetricsSetConfig(&sc));
        CUpti_SassMetricsEnable_Params en{CUpti_SassMetricsEnable_Params_STRUCT_SIZE};
        en.ctx = ctx;
        en.enableLazyPatching = getenv("SMF_EAGER") ? 0 : 1;
        double t = now_us();
        CK(cuptiSassMetricsEnable(&en));
        printf("enable %.1f us\n", now_us() - t);
    }
    int n = 1 << 20;
    float *x, *y, *a, *b, *c;
    cudaMalloc(&x, n * 4);
    cudaMalloc(&y, n * 4);
    if (!getenv("SMF_NO_MEMSET")) {
        cudaMemset(x, 0, n * 4);
        cudaMemset(y, 0, n * 4);
    }
    int m = 1024;
    cudaMalloc(&a, m * m * 4);
    cudaMalloc(&b, m * m * 4);
    cudaMalloc(&c, m * m * 4);
    cudaMemset(a, 0, m * m * 4);
    cudaMemset(b, 0, m * m * 4);
#ifndef NO_CUBLAS
    cublasHandle_t h = nullptr;
    bool blas = !getenv("SMF_NO_BLAS");
    if (blas) cublasCreate(&h);
#else
    bool blas = false;
#endif
    auto flush = [&](const char* label) {
        watch_label = label;
        alarm(30);
        double t0 = now_us();
        cudaDeviceSynchronize();
        if (!sass) return;
        double t1 = now_us();
        CUpti_SassMetricsGetDataProperties_Params dp{CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE};
        dp.ctx = ctx;
        CK(cuptiSassMetricsGetDataProperties(&dp));
        std::map<std::string, std::map<uint64_t, unsigned long long>> sums;
        std::map<std::string, size_t> pcs;
        if (dp.numOfPatchedInstructionRecords && dp.numOfInstances) {
            std::vector<CUpti_SassMetrics_Data> data(dp.numOfPatchedInstructionRecords);
            std::vector<CUpti_SassMetrics_InstanceValue> values(dp.numOfPatchedInstructionRecords * dp.numOfInstances);
            for (size_t i = 0; i < data.size(); ++i) {
                if (!getenv("SMF_NO_STRUCTSIZE")) data[i].structSize = sizeof(CUpti_SassMetrics_Data);
                data[i].pInstanceValues = &values[i * dp.numOfInstances];
            }
            CUpti_SassMetricsFlushData_Params fp{CUpti_SassMetricsFlushData_Params_STRUCT_SIZE};
            fp.ctx = ctx;
            fp.numOfPatchedInstructionRecords = dp.numOfPatchedInstructionRecords;
            fp.numOfInstances = dp.numOfInstances;
            fp.pMetricsData = data.data();
            CK(cuptiSassMetricsFlushData(&fp));
            for (auto& d : data) {
                std::string fn = d.functionName ? d.functionName : "?";
                pcs[fn]++;
                for (size_t k = 0; k < dp.numOfInstances; ++k) sums[fn][d.pInstanceValues[k].metricId] += d.pInstanceValues[k].value;
                free((void*)d.functionName);
            }
        }
        double t2 = now_us();
        alarm(0);
        printf("%s: sync %.1f us, flush %.1f us, records %zu, instances %zu\n", label, t1 - t0, t2 - t1,
               dp.numOfPatchedInstructionRecords, dp.numOfInstances);
        for (auto& [fn, s] : sums) {
            printf("  %s (%zu records)", fn.c_str(), pcs[fn]);
            for (auto& [id, v] : s) printf(" %s=%llu", names[id].c_str(), v);
            printf("\n");
        }
    };
    if (!getenv("SMF_NO_BEFORE")) flush("before");
    float alpha = 1, beta = 0;
    for (int round = 0; round < 3; ++round) {
        double t = now_us();
        spin<<<132, 256>>>(y, 1000);
        printf("round %d spin launch %.1f us\n", round, now_us() - t);
        flush("spin(132x256, 1000 iters)");
        axpy<<<(n + 255) / 256, 256>>>(x, y, 2.0f, n);
        flush("axpy(n=1M)");
        if (!blas) continue;
        t = now_us();
#ifndef NO_CUBLAS
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &alpha, a, m, b, m, &beta, c, m);
#endif
        printf("round %d sgemm launch %.1f us\n", round, now_us() - t);
        flush("sgemm 1024");
    }
    if (const char* g = getenv("SMF_GRAPH")) {
        int launches = atoi(g);
        const char* mode_s = getenv("SMF_CAPTURE_MODE") ? getenv("SMF_CAPTURE_MODE") : "global";
        cudaStreamCaptureMode mode = strcmp(mode_s, "relaxed") == 0        ? cudaStreamCaptureModeRelaxed
                                     : strcmp(mode_s, "thread_local") == 0 ? cudaStreamCaptureModeThreadLocal
                                                                           : cudaStreamCaptureModeGlobal;
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
#ifndef NO_CUBLAS
        if (blas) cublasSetStream(h, s);
#endif
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        double t = now_us();
        if (cudaStreamBeginCapture(s, mode) != cudaSuccess) { printf("begin capture failed\n"); return 2; }
        spin<<<132, 256, 0, s>>>(y, 1000);
        axpy<<<(n + 255) / 256, 256, 0, s>>>(x, y, 2.0f, n);
        spin<<<132, 256, 0, s>>>(y, 500);
        graph_only<<<66, 128, 0, s>>>(y, 300);
#ifndef NO_CUBLAS
        if (blas) cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &alpha, a, m, b, m, &beta, c, m);
#endif
        cudaError_t e = cudaStreamEndCapture(s, &graph);
        printf("graph captured (%s): %s, %.1f us\n", mode_s, cudaGetErrorString(e), now_us() - t);
        if (e != cudaSuccess) return 2;
        size_t nodes = 0;
        cudaGraphGetNodes(graph, nullptr, &nodes);
        e = cudaGraphInstantiate(&exec, graph, 0);
        printf("graph nodes %zu, instantiate: %s\n", nodes, cudaGetErrorString(e));
        if (e != cudaSuccess) return 2;
        for (int i = 0; i < launches; ++i) cudaGraphLaunch(exec, s);
        char label[96];
        snprintf(label, sizeof label, "graph x%d, one flush", launches);
        flush(label);
        for (int i = 0; i < launches; ++i) {
            cudaGraphLaunch(exec, s);
            snprintf(label, sizeof label, "graph launch %d, flushed alone", i + 1);
            flush(label);
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        cudaStreamDestroy(s);
    }
    if (sass) {
        CUpti_SassMetricsDisable_Params dis{CUpti_SassMetricsDisable_Params_STRUCT_SIZE};
        dis.ctx = ctx;
        CK(cuptiSassMetricsDisable(&dis));
        printf("disable: dropped %zu\n", dis.numOfDroppedRecords);
        CUpti_SassMetricsUnsetConfig_Params un{CUpti_SassMetricsUnsetConfig_Params_STRUCT_SIZE};
        un.deviceIndex = 0;
        CK(cuptiSassMetricsUnsetConfig(&un));
        cuptiActivityFlushAll(1);
        printf("kernel activity records: %d\n", kernel_records);
    }
    return 0;
}
