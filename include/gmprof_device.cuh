/*
 * gmprof_device.cuh: in-kernel region timers for gmprof (device side).
 *
 * Header-only. Compiles with nvcc and with NVRTC: it includes nothing (no standard library,
 * no CUDA runtime header) and uses only built-ins and inline PTX (%globaltimer, %smid,
 * st.global, red.global).
 *
 *   #include "gmprof_device.cuh"
 *   __global__ void k(float *x, unsigned long long *timers) {
 *       gmprof_dt_lane t = gmprof_dt_init_block(timers);       // thread 0 of each block records
 *       gmprof_dt_begin(t, REGION_LOAD);  ... ;  gmprof_dt_end(t, REGION_LOAD, bytes_loaded);
 *       gmprof_dt_instant(t, EVENT_TILE_DONE, tile);
 *       gmprof_dt_finish(t);
 *   }
 *
 * The host allocates the buffer (gmprof_dt_alloc in gmprof.h, gmprof.DeviceTimers in Python,
 * gmprof::ways_in::device_timers in Rust), passes its device pointer to the kernel, and after
 * the launch collects it: records are decoded into per-region spans attributed to the
 * launch's kernel row and range (README, "In-kernel region timers").
 *
 * Markers are leader-only stores: no barrier, no fence. A timestamp is the recording
 * thread's view; put a __syncthreads() (or a named barrier) before a marker when the whole
 * block must have reached it. Define GMPROF_DT_DISABLE to compile every marker out.
 *
 * Where a stamp sits: a begin, an instant and a lane start do their work (the checks, the
 * %smid read, the tag, the address) before their %globaltimer read, and after it only the
 * check bits and the store; an end and a lane finish read %globaltimer first and do the rest
 * after. A span therefore holds the code between its markers plus the few instructions that
 * follow the begin's stamp. %globaltimer advances in steps (32 ns on an H100), so spans are
 * multiples of the step.
 *
 * ---------------------------------------------------------------------------------------
 * Buffer layout, version 1 (little-endian 64-bit words; 16-byte aligned base)
 *
 *   word 0  magic 0x54444D47 ("GMDT") in bits 0-31, version in 32-47, header words (8) in 48-63
 *   word 1  capacity in records in bits 0-31, record size in bytes (16) in bits 32-63  [host]
 *   word 2  overflow: records not written because their lane was full (atomic add)   [device]
 *   word 3  blocks in the grid in bits 0-31, lanes per block in 32-47, lane mode in 48-55
 *           (1 block, 2 warp, 3 group), 0x01 in 56-63 once written                    [device]
 *   word 4  sample every Nth block in bits 0-31, every Nth lane in 32-63               [device]
 *   word 5  records per lane in bits 0-31, recording lanes in 32-63                    [device]
 *   word 6  flags: bit 0 set when the base was not 16-byte aligned (then nothing is
 *           recorded and every record is counted in word 2); other bits 0              [device]
 *   word 7  reserved (0)
 *   word 8+ records, 2 words each. Recording lane g owns records [g*per_lane, (g+1)*per_lane).
 *
 *   A recording lane is a (block, lane) pair with block % sample_blocks == 0 and
 *   lane % sample_lanes == 0; its index is
 *     g = (block / sample_blocks) * ceil(lanes_per_block / sample_lanes) + lane / sample_lanes
 *   where block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z).
 *   Words 3-6 are written by thread 0 of block 0 (a grid's lanes all use one mode).
 *
 * Record (16 bytes, one 16-byte store):
 *   word a  %globaltimer, ns (64 bits: no wrap)
 *   word b  bits 0-31  payload (user value: bytes, iteration, ...)
 *           bits 32-43 region id (0-4095)
 *           bits 44-45 kind: 0 begin, 1 end, 2 instant, 3 lane marker
 *                      (lane marker region 0: lane start, payload = block; region 1: lane finish)
 *           bits 46-55 %smid
 *           bits 56-62 check = (a ^ 0x5A) & 0x7F
 *           bit  63    1
 *   An all-zero record is empty. A record with one zero word, or whose check does not match
 *   its timestamp, is torn (not completely written, or left from another launch): the
 *   decoder counts it and leaves it out.
 * ---------------------------------------------------------------------------------------
 */
#ifndef GMPROF_DEVICE_CUH
#define GMPROF_DEVICE_CUH

#define GMPROF_DT_MAGIC 0x54444D47u
#define GMPROF_DT_VERSION 1u
#define GMPROF_DT_HEADER_WORDS 8u
#define GMPROF_DT_RECORD_BYTES 16u
#define GMPROF_DT_MAX_REGION 4095u
#define GMPROF_DT_FLAG_MISALIGNED 1ull

#define GMPROF_DT_BEGIN 0u
#define GMPROF_DT_END 1u
#define GMPROF_DT_INSTANT 2u
#define GMPROF_DT_LANE 3u

#define GMPROF_DT_MODE_BLOCK 1u
#define GMPROF_DT_MODE_WARP 2u
#define GMPROF_DT_MODE_GROUP 3u

/* One thread's recording state. slot == 0: this thread records nothing. */
struct gmprof_dt_lane {
    unsigned long long *slot;     /* the next record's first word */
    unsigned long long *end;      /* one past this lane's last record */
    unsigned long long *overflow; /* header word 2 */
};

/* The 64-bit global nanosecond timer. */
__device__ __forceinline__ unsigned long long gmprof_dt_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}

/* The SM this thread runs on. */
__device__ __forceinline__ unsigned int gmprof_dt_smid() {
    unsigned int s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

/* Bits of a record's second word that do not depend on its stamp: payload, region, kind,
   %smid, bit 63, and 0x5A in the check bits 56-62 (the stamp's low 7 bits are XORed in). */
__device__ __forceinline__ unsigned long long gmprof_dt_tag_base(unsigned int kind, unsigned int region,
                                                                 unsigned int payload) {
    return (unsigned long long)payload | ((unsigned long long)(region & 0xFFFu) << 32) |
           ((unsigned long long)(kind & 3u) << 44) | ((unsigned long long)(gmprof_dt_smid() & 0x3FFu) << 46) |
           (0x5Aull << 56) | (1ull << 63);
}

/* Second word of a record stamped at `t`: the check is (t ^ 0x5A) & 0x7F in bits 56-62. */
__device__ __forceinline__ unsigned long long gmprof_dt_tag(unsigned long long t, unsigned int kind,
                                                            unsigned int region, unsigned int payload) {
    return gmprof_dt_tag_base(kind, region, payload) ^ ((t << 56) & 0x7F00000000000000ull);
}

/* A lane's next record slot as a global address. */
__device__ __forceinline__ unsigned long long gmprof_dt_global(const unsigned long long *p) {
    unsigned long long g;
    asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(p));
    return g;
}

/* Counts a record that did not fit (header word 2). */
__device__ __forceinline__ void gmprof_dt_count_overflow(unsigned long long *overflow) {
    asm volatile("red.global.add.u64 [%0], %1;" ::"l"(gmprof_dt_global(overflow)), "l"(1ull) : "memory");
}

/* Writes one record whose stamp opens what follows (a begin, an instant, a lane marker), or
   counts it as overflow when the lane is full. Everything but the stamp (the %smid read, the
   tag, the address) is done before the %globaltimer read; after it come only the check bits
   and the store, so little of the marker's own cost lands inside the region it opens. */
__device__ __forceinline__ void gmprof_dt_put(gmprof_dt_lane &l, unsigned int kind, unsigned int region,
                                              unsigned int payload) {
#ifndef GMPROF_DT_DISABLE
    if (l.slot == 0) return;
    if (l.slot >= l.end) {
        gmprof_dt_count_overflow(l.overflow);
        return;
    }
    unsigned long long base = gmprof_dt_tag_base(kind, region, payload);
    unsigned long long g = gmprof_dt_global(l.slot);
    asm volatile(
        "{ .reg .u64 t, c;\n\t"
        "mov.u64 t, %%globaltimer;\n\t"
        "shl.b64 c, t, 56;\n\t"
        "and.b64 c, c, 0x7F00000000000000;\n\t"
        "xor.b64 c, c, %1;\n\t"
        "st.global.v2.u64 [%0], {t, c}; }" ::"l"(g),
        "l"(base)
        : "memory");
    l.slot += 2;
#endif
}

/* Writes one record whose stamp closes what precedes it (an end): the %globaltimer read is
   the first thing it does, the rest (checks, %smid, tag, store) comes after the stamp. */
__device__ __forceinline__ void gmprof_dt_put_close(gmprof_dt_lane &l, unsigned int kind, unsigned int region,
                                                    unsigned int payload) {
#ifndef GMPROF_DT_DISABLE
    unsigned long long t = gmprof_dt_now();
    if (l.slot == 0) return;
    if (l.slot >= l.end) {
        gmprof_dt_count_overflow(l.overflow);
        return;
    }
    unsigned long long b = gmprof_dt_tag(t, kind, region, payload);
    asm volatile("st.global.v2.u64 [%0], {%1, %2};" ::"l"(gmprof_dt_global(l.slot)), "l"(t), "l"(b) : "memory");
    l.slot += 2;
#endif
}

/* Sets up the lane `lane` (of `lanes_per_block`) for the calling thread; only a thread with
   `leader` true records. Every Nth block (sample_blocks) and lane (sample_lanes) records. */
__device__ __forceinline__ gmprof_dt_lane gmprof_dt_init(unsigned long long *buf, unsigned int mode,
                                                         unsigned int lanes_per_block, unsigned int lane,
                                                         bool leader, unsigned int sample_blocks,
                                                         unsigned int sample_lanes) {
    gmprof_dt_lane l;
    l.slot = 0;
    l.end = 0;
    l.overflow = buf + 2;
#ifndef GMPROF_DT_DISABLE
    if (buf == 0) return l;
    if (sample_blocks == 0) sample_blocks = 1;
    if (sample_lanes == 0) sample_lanes = 1;
    if (lanes_per_block == 0) lanes_per_block = 1;
    unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
    unsigned int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned long long sampled_blocks = (blocks + sample_blocks - 1) / sample_blocks;
    unsigned long long sampled_lanes = (lanes_per_block + sample_lanes - 1) / sample_lanes;
    unsigned long long lanes = sampled_blocks * sampled_lanes;
    unsigned long long capacity = buf[1] & 0xFFFFFFFFull;
    unsigned long long per_lane = lanes ? capacity / lanes : 0;
    /* Records are 16-byte stores: a base that is not 16-byte aligned would fault. Then no
       record is written, every one is counted as overflow, and word 6 says why. */
    bool misaligned = ((unsigned long long)buf & 15ull) != 0;
    if (block == 0 && tid == 0) {
        buf[3] = (unsigned long long)blocks | ((unsigned long long)(lanes_per_block & 0xFFFFu) << 32) |
                 ((unsigned long long)(mode & 0xFFu) << 48) | (1ull << 56);
        buf[4] = (unsigned long long)sample_blocks | ((unsigned long long)sample_lanes << 32);
        buf[5] = per_lane | (lanes << 32);
        if (misaligned) buf[6] = GMPROF_DT_FLAG_MISALIGNED;
    }
    if (!leader || lane >= lanes_per_block || block % sample_blocks != 0 || lane % sample_lanes != 0) return l;
    unsigned long long g = (unsigned long long)(block / sample_blocks) * sampled_lanes + lane / sample_lanes;
    l.slot = buf + GMPROF_DT_HEADER_WORDS + 2ull * g * per_lane;
    l.end = misaligned ? l.slot : l.slot + 2ull * per_lane;
    gmprof_dt_put(l, GMPROF_DT_LANE, 0u, block);
#endif
    return l;
}

/* One lane per block; thread 0 records. */
__device__ __forceinline__ gmprof_dt_lane gmprof_dt_init_block(unsigned long long *buf,
                                                               unsigned int sample_blocks = 1) {
    unsigned int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    return gmprof_dt_init(buf, GMPROF_DT_MODE_BLOCK, 1u, 0u, tid == 0, sample_blocks, 1u);
}

/* One lane per warp; lane 0 of each warp records. */
__device__ __forceinline__ gmprof_dt_lane gmprof_dt_init_warp(unsigned long long *buf, unsigned int sample_blocks = 1,
                                                              unsigned int sample_warps = 1) {
    unsigned int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned int warps = (blockDim.x * blockDim.y * blockDim.z + 31u) / 32u;
    return gmprof_dt_init(buf, GMPROF_DT_MODE_WARP, warps, tid / 32u, (tid % 32u) == 0u, sample_blocks,
                          sample_warps);
}

/* One lane per named group (warp-specialized kernels: producer, consumers, ...). The caller
   says which group the thread is in and whether it is that group's one leader. */
__device__ __forceinline__ gmprof_dt_lane gmprof_dt_init_group(unsigned long long *buf, unsigned int groups,
                                                               unsigned int group, bool leader,
                                                               unsigned int sample_blocks = 1,
                                                               unsigned int sample_groups = 1) {
    return gmprof_dt_init(buf, GMPROF_DT_MODE_GROUP, groups, group, leader, sample_blocks, sample_groups);
}

/* Opens region `region` (0-4095) with an optional 32-bit payload. */
__device__ __forceinline__ void gmprof_dt_begin(gmprof_dt_lane &l, unsigned int region, unsigned int payload = 0) {
    gmprof_dt_put(l, GMPROF_DT_BEGIN, region, payload);
}

/* Closes the innermost open region `region` of this lane. */
__device__ __forceinline__ void gmprof_dt_end(gmprof_dt_lane &l, unsigned int region, unsigned int payload = 0) {
    gmprof_dt_put_close(l, GMPROF_DT_END, region, payload);
}

/* A point event. */
__device__ __forceinline__ void gmprof_dt_instant(gmprof_dt_lane &l, unsigned int region,
                                                  unsigned int payload = 0) {
    gmprof_dt_put(l, GMPROF_DT_INSTANT, region, payload);
}

/* Marks the lane finished (optional; the decoder reports lanes without it). */
__device__ __forceinline__ void gmprof_dt_finish(gmprof_dt_lane &l) { gmprof_dt_put_close(l, GMPROF_DT_LANE, 1u, 0u); }

#endif /* GMPROF_DEVICE_CUH */
