// CUDA graphs under gmprof: the same work launched eagerly or through a captured graph,
// inside nested NVTX ranges. No gmprof header or library: run it under `gmprof run`.
//
//   nvcc -O2 -o graph_steps examples/c/graph_steps.cu
//   gmprof run -o out -- ./graph_steps STEPS VARIANT
//
// One block of work is 8 kernels, a memset and a device-to-device memcpy over arrays of
// 16 Mi floats (64 MiB each, larger than the L2 cache), so every kernel moves a known
// number of DRAM bytes. VARIANT:
//   eager         the block launched directly on a stream, every step (the reference)
//   eager_child   the block and the child graph's 2 kernels, launched directly (the
//                 reference for child)
//   graph         captured once (global capture mode), launched every step
//   thread_local  the same, captured in thread-local mode
//   relaxed       the same, captured in relaxed mode
//   to_graph      captured with cudaStreamBeginCaptureToGraph into an existing graph
//   child         the captured block plus a child-graph node of 2 more kernels
//   update        as graph, but halfway through the steps a re-captured block with other
//                 parameters is applied with cudaGraphExecUpdate
//
// Ranges: "setup" (eager initialisation) and "capture" (graph building: launches captured
// there never run), then per step "step N" > "work" > "block". The graph launch, or the
// eager launches, happen inside "block".
//
// Printed at the end (check_run.py and scripts/gpu/graphs-validate.sh read these lines):
//   graph_steps: variant=V steps=S kernels_per_step=K memsets_per_step=1 memcpys_per_step=1
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nvtx3/nvToolsExt.h>
#include <cuda_runtime.h>

constexpr size_t N = size_t(16) << 20;  // floats per array: 64 MiB

__global__ void scale(const float* x, float* y, float s, size_t n) {
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n) y[i] = s * x[i];
}
__global__ void add(const float* x, const float* y, float* z, size_t n) {
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n) z[i] = x[i] + y[i];
}
__global__ void axpy(const float* x, float* y, float a, size_t n) {
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
__global__ void square(const float* x, float* y, size_t n) {
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}
__global__ void relu(const float* x, float* y, size_t n) {
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

#define CUDA(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e)); \
    std::exit(1); } } while (0)

struct Arrays { float *a, *b, *c, *d; };

// The block: 8 kernels, then a memset and a memcpy, all on `s`.
static void block(const Arrays& m, cudaStream_t s, float factor) {
    const unsigned threads = 256, blocks = unsigned((N + threads - 1) / threads);
    scale<<<blocks, threads, 0, s>>>(m.a, m.b, factor, N);
    add<<<blocks, threads, 0, s>>>(m.b, m.a, m.c, N);
    scale<<<blocks, threads, 0, s>>>(m.c, m.d, 0.5f, N);
    axpy<<<blocks, threads, 0, s>>>(m.d, m.a, 0.25f, N);
    square<<<blocks, threads, 0, s>>>(m.a, m.b, N);
    add<<<blocks, threads, 0, s>>>(m.b, m.c, m.d, N);
    scale<<<blocks, threads, 0, s>>>(m.d, m.c, 0.125f, N);
    relu<<<blocks, threads, 0, s>>>(m.c, m.a, N);
    CUDA(cudaMemsetAsync(m.b, 0, N * sizeof(float), s));
    CUDA(cudaMemcpyAsync(m.b, m.d, N * sizeof(float), cudaMemcpyDeviceToDevice, s));
}

// The child graph's 2 kernels.
static void tail(const Arrays& m, cudaStream_t s) {
    const unsigned threads = 256, blocks = unsigned((N + threads - 1) / threads);
    scale<<<blocks, threads, 0, s>>>(m.b, m.c, 2.f, N);
    add<<<blocks, threads, 0, s>>>(m.c, m.d, m.a, N);
}

static cudaGraph_t capture(const Arrays& m, cudaStream_t s, cudaStreamCaptureMode mode, float factor) {
    cudaGraph_t g;
    CUDA(cudaStreamBeginCapture(s, mode));
    block(m, s, factor);
    CUDA(cudaStreamEndCapture(s, &g));
    return g;
}

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
    const char* variant = argc > 2 ? argv[2] : "graph";
    const bool eager_child = !std::strcmp(variant, "eager_child");
    const bool eager = eager_child || !std::strcmp(variant, "eager");
    const bool child = !std::strcmp(variant, "child");
    const bool update = !std::strcmp(variant, "update");
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    if (!std::strcmp(variant, "thread_local")) mode = cudaStreamCaptureModeThreadLocal;
    if (!std::strcmp(variant, "relaxed")) mode = cudaStreamCaptureModeRelaxed;
    const bool known = eager || child || update || !std::strcmp(variant, "graph") ||
                       !std::strcmp(variant, "thread_local") || !std::strcmp(variant, "relaxed") ||
                       !std::strcmp(variant, "to_graph");
    if (!known || steps < 1) {
        std::fprintf(stderr, "usage: graph_steps STEPS eager|eager_child|graph|thread_local|relaxed|to_graph|child|update\n");
        return 2;
    }

    Arrays m;
    cudaStream_t s;
    nvtxRangePushA("setup");
    CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (float** p : {&m.a, &m.b, &m.c, &m.d}) {
        CUDA(cudaMalloc(p, N * sizeof(float)));
        CUDA(cudaMemsetAsync(*p, 0, N * sizeof(float), s));
    }
    CUDA(cudaStreamSynchronize(s));
    nvtxRangePop();

    cudaGraphExec_t exec = nullptr;
    cudaGraphExec_t updated_from = nullptr;
    cudaGraph_t second = nullptr;
    if (!eager) {
        nvtxRangePush("capture");
        cudaGraph_t g;
        if (!std::strcmp(variant, "to_graph")) {
            CUDA(cudaGraphCreate(&g, 0));
            CUDA(cudaStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal));
            block(m, s, 1.5f);
            CUDA(cudaStreamEndCapture(s, &g));
        } else {
            g = capture(m, s, mode, 1.5f);
        }
        if (child) {
            cudaGraph_t sub;
            CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
            tail(m, s);
            CUDA(cudaStreamEndCapture(s, &sub));
            // The child runs after every node of the block (redundant edges are allowed).
            size_t count = 0;
            CUDA(cudaGraphGetNodes(g, nullptr, &count));
            cudaGraphNode_t deps[16];
            if (count > 16) count = 16;
            CUDA(cudaGraphGetNodes(g, deps, &count));
            cudaGraphNode_t node;
            CUDA(cudaGraphAddChildGraphNode(&node, g, deps, count, sub));
            CUDA(cudaGraphDestroy(sub));
        }
        if (update) second = capture(m, s, cudaStreamCaptureModeGlobal, 3.0f);
        CUDA(cudaGraphInstantiate(&exec, g, 0));
        CUDA(cudaGraphDestroy(g));
        nvtxRangePop();
    }

    char name[32];
    for (int step = 0; step < steps; ++step) {
        std::snprintf(name, sizeof name, "step %d", step);
        nvtxRangePushA(name);
        nvtxRangePushA("work");
        nvtxRangePushA("block");
        if (update && step == steps / 2) {
            cudaGraphExecUpdateResultInfo info;
            CUDA(cudaGraphExecUpdate(exec, second, &info));
            if (info.result != cudaGraphExecUpdateSuccess) {
                std::fprintf(stderr, "cudaGraphExecUpdate: result %d\n", int(info.result));
                return 1;
            }
            updated_from = exec;
        }
        if (eager) {
            block(m, s, 1.5f);
            if (eager_child) tail(m, s);
        } else {
            CUDA(cudaGraphLaunch(exec, s));
        }
        CUDA(cudaStreamSynchronize(s));
        nvtxRangePop();
        nvtxRangePop();
        nvtxRangePop();
    }
    if (second) CUDA(cudaGraphDestroy(second));
    if (exec) CUDA(cudaGraphExecDestroy(exec));
    (void)updated_from;
    for (float* p : {m.a, m.b, m.c, m.d}) CUDA(cudaFree(p));
    CUDA(cudaStreamDestroy(s));
    std::printf("graph_steps: variant=%s steps=%d kernels_per_step=%d memsets_per_step=1 memcpys_per_step=1\n",
                variant, steps, child || eager_child ? 10 : 8);
    return 0;
}
