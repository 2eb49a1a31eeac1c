// In-kernel region timers (include/gmprof_device.cuh) under gmprof, from C/CUDA.
//
//   cargo build --release
//   nvcc -O2 -arch=native -o device_timers examples/c/device_timers.cu -Iinclude -Ltarget/release -lgmprof
//   LD_LIBRARY_PATH=target/release:$LD_LIBRARY_PATH ./device_timers OUT [long_ms]
//
// Kernels, each in its own gmprof range (trace mode, so kernels carry real times):
//   pipeline     load / compute / store regions, one lane per block, payload = bytes
//   specialized  a producer warp and a consumer group per block (gmprof_dt_init_group),
//                with an instant per tile
//   warps        one lane per warp, every 2nd block and every 2nd warp recording
//   spin         regions that busy-wait on %globaltimer for 1 us, 10 us and 1 ms (end payload:
//                what the spin observed beyond that, ns)
//   empty        16 empty regions per block (the markers' own cost inside a span)
//   long_spin    one block spinning long_ms (default 5500 ms: past a 32-bit timer's wrap)
//   overflow     5 records per lane into a buffer with room for 3 per lane
//   misaligned   a buffer 8 bytes off 16-byte alignment: nothing stored, all counted, refused
// Then it times the marker overhead (printed as "overhead: ..." lines) and finishes, writing
// OUT/regions.csv, OUT/report.json and OUT/trace.json. scripts/gpu/device-timers-validate.sh
// checks the results.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include "gmprof.h"
#include "gmprof_device.cuh"

enum { R_LOAD = 1, R_COMPUTE = 2, R_STORE = 3 };
enum { R_PRODUCE = 1, R_CONSUME = 2, E_TILE_READY = 3 };
enum { R_SPIN_1US = 1, R_SPIN_10US = 2, R_SPIN_1MS = 3, R_SPIN_LONG = 4 };

#define GMPROF(call) do { gmprof_status s_ = (call); if (s_ != GMPROF_OK) { \
    std::fprintf(stderr, "%s failed (%d): %s\n", #call, (int)s_, gmprof_last_error()); std::exit(1); } } while (0)
#define CUDA(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_)); std::exit(1); } } while (0)

template <bool ON>
__global__ void pipeline(const float *in, float *out, int n, int iters, unsigned long long *timers) {
    gmprof_dt_lane t = ON ? gmprof_dt_init_block(timers) : gmprof_dt_lane{0, 0, 0};
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (ON) gmprof_dt_begin(t, R_LOAD, blockDim.x * 4u);
    float x = i < n ? in[i] : 0.f;
    __syncthreads();
    if (ON) { gmprof_dt_end(t, R_LOAD); gmprof_dt_begin(t, R_COMPUTE, iters); }
    float acc = 0.f;
    for (int k = 0; k < iters; ++k) acc = acc * 1.0001f + x;
    __syncthreads();
    if (ON) { gmprof_dt_end(t, R_COMPUTE); gmprof_dt_begin(t, R_STORE, blockDim.x * 4u); }
    if (i < n) out[i] = acc;
    __syncthreads();
    if (ON) { gmprof_dt_end(t, R_STORE); gmprof_dt_finish(t); }
}

// Warp 0 produces tiles into shared memory, warps 1..7 consume them.
__global__ void specialized(const float *in, float *out, int tiles, unsigned long long *timers) {
    __shared__ float tile[256];
    unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    unsigned group = warp == 0 ? 0 : 1;
    bool leader = (warp == 0 && lane == 0) || (warp == 1 && lane == 0);
    gmprof_dt_lane t = gmprof_dt_init_group(timers, 2, group, leader);
    float acc = 0.f;
    for (int k = 0; k < tiles; ++k) {
        if (group == 0) {
            gmprof_dt_begin(t, R_PRODUCE, k);
            for (int j = lane; j < 256; j += 32) tile[j] = in[(blockIdx.x * tiles + k) * 256 + j];
            gmprof_dt_end(t, R_PRODUCE);
            gmprof_dt_instant(t, E_TILE_READY, k);
        }
        __syncthreads();
        if (group == 1) {
            gmprof_dt_begin(t, R_CONSUME, k);
            for (int r = 0; r < 200; ++r) acc = acc * 0.999f + tile[(threadIdx.x + r) % 256];
            gmprof_dt_end(t, R_CONSUME);
        }
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    gmprof_dt_finish(t);
}

__global__ void warps(float *out, unsigned long long *timers) {
    gmprof_dt_lane t = gmprof_dt_init_warp(timers, 2, 2);
    gmprof_dt_begin(t, 1, threadIdx.x / 32);
    float acc = threadIdx.x;
    for (int r = 0; r < 1000 * (1 + threadIdx.x / 32); ++r) acc = acc * 0.999f + 1.f;
    gmprof_dt_end(t, 1);
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    gmprof_dt_finish(t);
}

// Busy-waits until %globaltimer has advanced by at least `ns` and returns by how much it had
// when the loop saw it: the time the spin itself observed (its first read to its last).
__device__ unsigned long long spin_for(unsigned long long ns) {
    unsigned long long t0 = gmprof_dt_now(), t;
    while ((t = gmprof_dt_now()) - t0 < ns) {
    }
    return t - t0;
}

// Each spin's end payload is what the spin observed beyond its nominal time (observed −
// nominal, ns), so the check compares the decoded span with both.
__global__ void spin(unsigned long long *timers) {
    gmprof_dt_lane t = gmprof_dt_init_block(timers);
    if (threadIdx.x == 0) {
        gmprof_dt_begin(t, R_SPIN_1US);
        unsigned long long o = spin_for(1000);
        gmprof_dt_end(t, R_SPIN_1US, (unsigned)(o - 1000));
        gmprof_dt_begin(t, R_SPIN_10US);
        o = spin_for(10000);
        gmprof_dt_end(t, R_SPIN_10US, (unsigned)(o - 10000));
        gmprof_dt_begin(t, R_SPIN_1MS);
        o = spin_for(1000000);
        gmprof_dt_end(t, R_SPIN_1MS, (unsigned)(o - 1000000));
    }
    gmprof_dt_finish(t);
}

// Begin payload: the nominal time in ms; end payload: observed − nominal, ns.
__global__ void long_spin(unsigned long long ns, unsigned long long *timers) {
    gmprof_dt_lane t = gmprof_dt_init_block(timers);
    if (threadIdx.x == 0) {
        gmprof_dt_begin(t, R_SPIN_LONG, (unsigned)(ns / 1000000ull));
        unsigned long long o = spin_for(ns);
        gmprof_dt_end(t, R_SPIN_LONG, (unsigned)(o - ns));
    }
    gmprof_dt_finish(t);
}

// Empty regions: `pairs` begin/end pairs back to back on thread 0. What a span holds besides
// its code is the markers' own cost inside it (the begin's instructions after its stamp).
__global__ void empty(int pairs, unsigned long long *timers) {
    gmprof_dt_lane t = gmprof_dt_init_block(timers);
    if (threadIdx.x == 0) {
        for (int k = 0; k < pairs; ++k) {
            gmprof_dt_begin(t, 1, k);
            gmprof_dt_end(t, 1);
        }
    }
    gmprof_dt_finish(t);
}

// Markers only: `markers` begin/end pairs per lane with a little work between them.
template <bool ON>
__global__ void markers(float *out, int pairs, unsigned long long *timers) {
    gmprof_dt_lane t = ON ? gmprof_dt_init_block(timers) : gmprof_dt_lane{0, 0, 0};
    float acc = threadIdx.x;
    for (int k = 0; k < pairs; ++k) {
        if (ON) gmprof_dt_begin(t, 1, k);
        acc = acc * 0.999f + 1.f;
        if (ON) gmprof_dt_end(t, 1);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// With GMPROF_DT_DUMP=DIR, writes the raw buffer (header and records) to DIR/NAME.bin before
// it is collected: the recorded buffers the CPU tests decode (tests/data/device_timers/).
static void dump(const unsigned long long *device_ptr, unsigned capacity, const char *name) {
    const char *dir = std::getenv("GMPROF_DT_DUMP");
    if (!dir) return;
    size_t bytes = 64 + 16ull * capacity;
    void *host = std::malloc(bytes);
    GMPROF(gmprof_dt_read_device((unsigned long long)device_ptr, host, bytes));
    char path[4096];
    std::snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = std::fopen(path, "wb");
    if (f) {
        std::fwrite(host, 1, bytes, f);
        std::fclose(f);
    }
    std::free(host);
}

static float time_ms(void (*launch)(void *), void *arg, int reps) {
    cudaEvent_t a, b;
    CUDA(cudaEventCreate(&a));
    CUDA(cudaEventCreate(&b));
    launch(arg);  // warm-up
    CUDA(cudaEventRecord(a));
    for (int r = 0; r < reps; ++r) launch(arg);
    CUDA(cudaEventRecord(b));
    CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CUDA(cudaEventElapsedTime(&ms, a, b));
    return ms / reps;
}

struct Args {
    float *in, *out;
    int n, blocks, iters;
    unsigned long long *timers;
};

static void pipeline_on(void *p) {
    Args *a = (Args *)p;
    pipeline<true><<<a->blocks, 256>>>(a->in, a->out, a->n, a->iters, a->timers);
}
static void pipeline_off(void *p) {
    Args *a = (Args *)p;
    pipeline<false><<<a->blocks, 256>>>(a->in, a->out, a->n, a->iters, nullptr);
}
static void markers_on(void *p) {
    Args *a = (Args *)p;
    markers<true><<<a->blocks, 128>>>(a->out, a->iters, a->timers);
}
static void markers_off(void *p) {
    Args *a = (Args *)p;
    markers<false><<<a->blocks, 128>>>(a->out, a->iters, nullptr);
}

int main(int argc, char **argv) {
    const char *out_dir = argc > 1 ? argv[1] : "gmprof-out-device-timers";
    unsigned long long long_ms = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 5500;
    int sms = 0;
    CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int blocks = 2 * sms, n = blocks * 256;
    float *in, *out;
    CUDA(cudaMalloc(&in, sizeof(float) * n * 8));
    CUDA(cudaMalloc(&out, sizeof(float) * n * 8));
    CUDA(cudaMemset(in, 0, sizeof(float) * n * 8));
    CUDA(cudaDeviceSynchronize());

    gmprof_options opts = GMPROF_OPTIONS_INIT;
    opts.mode = "trace";
    opts.output_dir = out_dir;
    GMPROF(gmprof_init(&opts));
    std::printf("sms: %d blocks: %d\n", sms, blocks);

    gmprof_dt_buffer *buf;
    unsigned long long *p;
    GMPROF(gmprof_dt_alloc(1 << 16, &buf));
    GMPROF(gmprof_dt_device_ptr(buf, &p));

    const char *pipeline_names[] = {"", "load", "compute", "store"};
    GMPROF(gmprof_push_range("pipeline"));
    pipeline<true><<<blocks, 256>>>(in, out, n, 4000, p);
    GMPROF(gmprof_dt_collect(buf, pipeline_names, 4, "sm"));
    GMPROF(gmprof_pop_range());

    const char *special_names[] = {"", "produce", "consume", "tile_ready"};
    GMPROF(gmprof_push_range("specialized"));
    specialized<<<blocks, 256>>>(in, out, 4, p);
    GMPROF(gmprof_dt_collect(buf, special_names, 4, "lane"));
    GMPROF(gmprof_pop_range());

    const char *warp_names[] = {"", "warp_work"};
    GMPROF(gmprof_push_range("warps"));
    warps<<<blocks + 1, 256>>>(out, p);
    GMPROF(gmprof_dt_collect(buf, warp_names, 2, "sm"));
    GMPROF(gmprof_pop_range());

    const char *spin_names[] = {"", "spin_1us", "spin_10us", "spin_1ms", "spin_long"};
    GMPROF(gmprof_push_range("spin"));
    spin<<<blocks, 32>>>(p);
    GMPROF(gmprof_dt_collect(buf, spin_names, 5, "sm"));
    GMPROF(gmprof_pop_range());

    const char *empty_names[] = {"", "empty"};
    GMPROF(gmprof_push_range("empty"));
    empty<<<blocks, 32>>>(16, p);
    GMPROF(gmprof_dt_collect(buf, empty_names, 2, "sm"));
    GMPROF(gmprof_pop_range());

    if (long_ms > 0) {
        GMPROF(gmprof_push_range("long_spin"));
        long_spin<<<1, 32>>>(long_ms * 1000000ull, p);
        GMPROF(gmprof_dt_collect(buf, spin_names, 5, "sm"));
        GMPROF(gmprof_pop_range());
    }

    // The spin kernel writes 8 records per lane (lane start, 3 begins, 3 ends, finish) into a
    // buffer with room for 3 per lane: 5 per lane overflow, and the device counts them.
    gmprof_dt_buffer *small;
    unsigned long long *ps;
    GMPROF(gmprof_dt_alloc(3 * blocks, &small));
    GMPROF(gmprof_dt_device_ptr(small, &ps));
    GMPROF(gmprof_push_range("overflow"));
    spin<<<blocks, 32>>>(ps);
    dump(ps, 3 * blocks, "overflow");
    GMPROF(gmprof_dt_collect(small, spin_names, 5, "sm"));
    GMPROF(gmprof_pop_range());
    GMPROF(gmprof_dt_free(small));
    std::printf("overflow: expected %d records\n", 5 * blocks);

    // Small exact-size buffers, dumped for the golden files: the spin kernel (8 records per
    // lane) and the specialized kernel on 8 blocks (16 records per lane).
    gmprof_dt_buffer *exact;
    unsigned long long *pe;
    GMPROF(gmprof_dt_alloc(8 * blocks, &exact));
    GMPROF(gmprof_dt_device_ptr(exact, &pe));
    GMPROF(gmprof_push_range("spin_exact"));
    spin<<<blocks, 32>>>(pe);
    dump(pe, 8 * blocks, "spin");
    GMPROF(gmprof_dt_collect(exact, spin_names, 5, "sm"));
    GMPROF(gmprof_pop_range());
    GMPROF(gmprof_push_range("specialized_small"));
    specialized<<<8, 256>>>(in, out, 4, pe);
    dump(pe, 8 * blocks, "specialized");
    GMPROF(gmprof_dt_collect(exact, special_names, 4, "lane"));
    GMPROF(gmprof_pop_range());
    GMPROF(gmprof_dt_free(exact));

    // A buffer whose base is 8- but not 16-byte aligned (records are 16-byte stores): the
    // kernel must not fault and must store nothing, counting every record as overflow and
    // flagging header word 6; the decoder refuses the buffer and says why.
    int failed = 0;
    {
        const unsigned cap = 8 * blocks;
        const size_t bytes = 64 + 16ull * cap;
        unsigned char *raw;
        CUDA(cudaMalloc(&raw, bytes + 16));
        CUDA(cudaMemset(raw, 0, bytes + 16));
        unsigned long long *image = (unsigned long long *)std::calloc(bytes / 8, 8);
        GMPROF(gmprof_dt_write_header(image, bytes));
        unsigned long long *mis = (unsigned long long *)(raw + 8);
        CUDA(cudaMemcpy(mis, image, bytes, cudaMemcpyHostToDevice));
        GMPROF(gmprof_push_range("misaligned"));
        spin<<<blocks, 32>>>(mis);
        cudaError_t e = cudaDeviceSynchronize();
        GMPROF(gmprof_pop_range());
        GMPROF(gmprof_dt_read_device((unsigned long long)mis, image, bytes));
        char *json = nullptr;
        gmprof_status s = gmprof_dt_decode(image, bytes, nullptr, 0, -2, nullptr, 0, &json);
        bool ok = e == cudaSuccess && s != GMPROF_OK && image[6] == 1 && image[2] == 8ull * blocks;
        std::printf("misaligned: kernel %s, word 6 = %llu, overflow %llu (expected %d), decode %s: %s -> %s\n",
                    cudaGetErrorString(e), image[6], image[2], 8 * blocks, s == GMPROF_OK ? "accepted" : "refused",
                    s == GMPROF_OK ? "-" : gmprof_last_error(), ok ? "OK" : "FAIL");
        if (json) gmprof_string_free(json);
        std::free(image);
        CUDA(cudaFree(raw));
        failed |= !ok;
    }

    // Overhead: markers with and without timers (not collected: the records are discarded).
    const int pairs = 1000;
    gmprof_dt_buffer *big;
    unsigned long long *pb;
    GMPROF(gmprof_dt_alloc((unsigned)(blocks * (2 * pairs + 2)), &big));
    GMPROF(gmprof_dt_device_ptr(big, &pb));
    GMPROF(gmprof_push_range("overhead"));
    Args m{in, out, n, blocks, pairs, pb};
    float off = time_ms(markers_off, &m, 20), on = time_ms(markers_on, &m, 20);
    std::printf("overhead: markers kernel %d pairs/lane, %d lanes: off %.3f us, on %.3f us, %.2f ns per marker\n",
                pairs, blocks, off * 1e3, on * 1e3, (on - off) * 1e6 / (2.0 * pairs));
    Args a{in, out, n, blocks, 4000, pb};
    float poff = time_ms(pipeline_off, &a, 20), pon = time_ms(pipeline_on, &a, 20);
    std::printf("overhead: pipeline example (7 markers/lane, %d lanes): off %.3f us, on %.3f us, slowdown %.2f %%\n",
                blocks, poff * 1e3, pon * 1e3, (pon / poff - 1.0) * 100.0);
    GMPROF(gmprof_pop_range());
    GMPROF(gmprof_dt_free(big));
    GMPROF(gmprof_dt_free(buf));
    CUDA(cudaDeviceSynchronize());
    GMPROF(gmprof_finish());
    std::printf("wrote %s\n", gmprof_output_dir());
    return failed;
}
