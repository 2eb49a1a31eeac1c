// gmprof from C/CUDA: a vector add and a scale kernel in nested ranges, profiled through
// libgmprof.so. Build and run on a GPU machine (see examples/c/README.md):
//
//   cargo build --release
//   nvcc -O2 -o vector_add examples/c/vector_add.cu -Iinclude -Ltarget/release -lgmprof
//   LD_LIBRARY_PATH=target/release:$LD_LIBRARY_PATH ./vector_add [out-dir]
//
// It checks the GPU results, writes ranges.csv, kernels.csv, ... into out-dir, and returns
// non-zero if gmprof or CUDA fails (printing gmprof_last_error()).
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "gmprof.h"

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

__global__ void scale(float* c, float k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] *= k;
}

#define GMPROF(call) do { gmprof_status s = (call); if (s != GMPROF_OK) { \
    std::fprintf(stderr, "%s failed (%d): %s\n", #call, (int)s, gmprof_last_error()); return 1; } } while (0)
#define CUDA(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e)); return 1; } } while (0)

int main(int argc, char** argv) {
    const int n = 1 << 24, steps = 3, threads = 256, blocks = (n + threads - 1) / threads;
    std::vector<float> host(n, 1.0f);
    float *a, *b, *c;
    CUDA(cudaMalloc(&a, n * sizeof(float)));
    CUDA(cudaMalloc(&b, n * sizeof(float)));
    CUDA(cudaMalloc(&c, n * sizeof(float)));
    CUDA(cudaDeviceSynchronize());  // the context exists before gmprof attaches to it

    gmprof_options opts = GMPROF_OPTIONS_INIT;
    opts.metrics = "dram__bytes_read.sum,dram__bytes_write.sum";
    opts.output_dir = argc > 1 ? argv[1] : "gmprof-out-c";
    GMPROF(gmprof_init(&opts));

    // Misuse is an error code, not a crash.
    if (gmprof_pop_range() != GMPROF_ERROR_UNBALANCED) { std::fprintf(stderr, "expected UNBALANCED\n"); return 1; }
    std::printf("pop without push -> %s\n", gmprof_last_error());

    GMPROF(gmprof_push_range("upload"));
    CUDA(cudaMemcpy(a, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(b, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    GMPROF(gmprof_pop_range());
    for (int s = 0; s < steps; ++s) {
        GMPROF(gmprof_push_range("step"));
        GMPROF(gmprof_push_range("add"));
        vector_add<<<blocks, threads>>>(a, b, c, n);
        GMPROF(gmprof_pop_range());
        GMPROF(gmprof_push_range("scale"));
        scale<<<blocks, threads>>>(c, 0.5f, n);
        GMPROF(gmprof_pop_range());
        CUDA(cudaDeviceSynchronize());
        GMPROF(gmprof_pop_range());
    }
    GMPROF(gmprof_finish());
    if (gmprof_push_range("late") != GMPROF_ERROR_NOT_INITIALIZED) { std::fprintf(stderr, "expected NOT_INITIALIZED\n"); return 1; }

    CUDA(cudaMemcpy(host.data(), c, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i += 4099) {
        if (host[i] != 1.0f) { std::fprintf(stderr, "wrong result at %d: %f\n", i, host[i]); return 1; }
    }
    std::printf("gmprof %s: %d steps profiled; outputs in %s\n", gmprof_version(), steps, opts.output_dir);
    return 0;
}
