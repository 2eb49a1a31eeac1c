// The probe engine's GPU check (scripts/gpu/probe-validate.sh): loads kernels through the
// driver API as PTX text (cuModuleLoadData) and as a zstd-compressed fatbin with PTX and
// SASS, runs them, and prints one FNV-1a hash per output buffer, so a run under
// `gmprof run --probe ...` can be compared bit for bit with a plain run.
//
//   nvcc -O2 -o probe_check examples/c/probe_check.cu -lcuda
//   ./probe_check tests/data/ptx/workloads_kernels_sm90.ptx tests/data/ptx/probe_kernels_default.fatbin [n]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda.h>

#define CU(call) do { CUresult r = (call); if (r != CUDA_SUCCESS) { const char* s = nullptr; \
    cuGetErrorString(r, &s); std::fprintf(stderr, "%s: %s\n", #call, s ? s : "?"); std::exit(1); } } while (0)

static std::vector<char> read_file(const char* path) {
    FILE* f = std::fopen(path, "rb");
    if (!f) { std::perror(path); std::exit(1); }
    std::fseek(f, 0, SEEK_END);
    long n = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    std::vector<char> buf(n + 1, 0);
    if (std::fread(buf.data(), 1, n, f) != (size_t)n) { std::perror(path); std::exit(1); }
    std::fclose(f);
    return buf;
}

static uint64_t fnv(CUdeviceptr p, size_t bytes) {
    std::vector<unsigned char> h(bytes);
    CU(cuMemcpyDtoH(h.data(), p, bytes));
    uint64_t x = 1469598103934665603ull;
    for (unsigned char c : h) { x ^= c; x *= 1099511628211ull; }
    return x;
}

static void launch(CUfunction f, unsigned grid, unsigned block, void** args) {
    CU(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, nullptr, args, nullptr));
}

int main(int argc, char** argv) {
    if (argc < 3) { std::fprintf(stderr, "usage: %s kernels.ptx kernels.fatbin [n]\n", argv[0]); return 2; }
    int n = argc > 3 ? std::atoi(argv[3]) : (1 << 24);
    CU(cuInit(0));
    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));
    std::vector<char> ptx = read_file(argv[1]);
    std::vector<char> fatbin = read_file(argv[2]);
    CUmodule text_module, fat_module;
    CU(cuModuleLoadData(&text_module, ptx.data()));
    CU(cuModuleLoadData(&fat_module, fatbin.data()));
    CUfunction vector_add, saxpy, mixer, histogram;
    CU(cuModuleGetFunction(&vector_add, text_module, "vector_add"));
    CU(cuModuleGetFunction(&saxpy, fat_module, "_Z5saxpyIfEvPT_PKS0_S0_i"));
    CU(cuModuleGetFunction(&mixer, fat_module, "_Z5mixerPfPK6float4i"));
    CU(cuModuleGetFunction(&histogram, fat_module, "_Z9histogramPjPKhi"));

    std::vector<float> ha(n), hb(n);
    std::vector<unsigned char> hd(n);
    for (int i = 0; i < n; ++i) { ha[i] = 0.5f * (i % 1000); hb[i] = 1.0f / (1 + i % 77); hd[i] = (unsigned char)(i * 2654435761u >> 24); }
    CUdeviceptr a, b, c, y, bins, data, out;
    CU(cuMemAlloc(&a, n * 4)); CU(cuMemAlloc(&b, n * 4)); CU(cuMemAlloc(&c, n * 4)); CU(cuMemAlloc(&y, n * 4));
    CU(cuMemAlloc(&bins, 256 * 4)); CU(cuMemAlloc(&data, n)); CU(cuMemAlloc(&out, n * 4));
    CU(cuMemcpyHtoD(a, ha.data(), n * 4)); CU(cuMemcpyHtoD(b, hb.data(), n * 4)); CU(cuMemcpyHtoD(y, hb.data(), n * 4));
    CU(cuMemcpyHtoD(data, hd.data(), n)); CU(cuMemsetD8(bins, 0, 256 * 4)); CU(cuMemsetD8(c, 0, n * 4));
    CU(cuMemsetD8(out, 0, n * 4));
    CU(cuCtxSynchronize());

    int quads = n / 4;
    float k = 1.5f;
    const unsigned T = 256;
    void* va[] = {&a, &b, &c, &n};
    launch(vector_add, (n + T - 1) / T, T, va);
    void* sa[] = {&y, &a, &k, &n};
    launch(saxpy, (n + T - 1) / T, T, sa);
    void* ma[] = {&out, &a, &quads};  // `a` read as float4
    launch(mixer, (quads + T - 1) / T, T, ma);
    void* ha_[] = {&bins, &data, &n};
    launch(histogram, 1024, T, ha_);
    // A second vector_add, through cuLaunchKernelEx: the probed function is cached, the
    // maps are new.
    CUlaunchConfig cfg = {};
    cfg.gridDimX = (n + T - 1) / T; cfg.gridDimY = 1; cfg.gridDimZ = 1;
    cfg.blockDimX = T; cfg.blockDimY = 1; cfg.blockDimZ = 1;
    CU(cuLaunchKernelEx(&cfg, vector_add, va, nullptr));
    CU(cuCtxSynchronize());
    std::printf("n %d\n", n);
    std::printf("vector_add %016llx\n", (unsigned long long)fnv(c, n * 4));
    std::printf("saxpy %016llx\n", (unsigned long long)fnv(y, n * 4));
    std::printf("mixer %016llx\n", (unsigned long long)fnv(out, quads * 4));
    std::printf("histogram %016llx\n", (unsigned long long)fnv(bins, 256 * 4));
    CU(cuModuleUnload(text_module));
    CU(cuModuleUnload(fat_module));
    CU(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
