"""The in-kernel region timers for Triton kernels, through inline PTX.

The same buffer format as ``include/gmprof_device.cuh`` (version 1), one lane per program
(``lane mode`` block). Inside a ``@triton.jit`` kernel that takes the buffer (a
:class:`gmprof.device_timers.DeviceTimers` tensor) as ``timers``::

    from gmprof.triton_timers import dt_init, dt_begin, dt_end, dt_finish

    base, per_lane = dt_init(timers)             # record 0: the lane's start
    dt_begin(timers, base, per_lane, 1, 1, 0)    # record 1: region 1 begins (payload 0)
    ...                                          # the region
    dt_end(timers, base, per_lane, 2, 1, 0)      # record 2: region 1 ends
    dt_finish(timers, base, per_lane, 3)         # record 3: the lane is done

The third argument is the record's number in the lane (count them in the kernel; a record
number past the lane's room is counted as overflow, never written). Scalar stores are
made by one thread of the program; the timestamp is that thread's ``%globaltimer``.
"""

import triton
import triton.language as tl


@triton.jit
def dt_now():
    """``%globaltimer``, ns (int64)."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def dt_smid():
    """``%smid`` (int32)."""
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def dt_tag_base(kind, region, payload):
    """The tag bits that do not depend on the stamp (``%smid`` read here), with 0x5A in the
    check bits: the stamp's low 7 bits are XORed in by :func:`dt_tag`."""
    zero = tl.zeros([], tl.int64)
    sm = dt_smid().to(tl.int64)
    return (
        ((zero + payload) & 0xFFFFFFFF)
        | (((zero + region) & 0xFFF) << 32)
        | (((zero + kind) & 3) << 44)
        | ((sm & 0x3FF) << 46)
        | ((zero + 0x5A) << 56)
        | ((zero + 1) << 63)
    )


@triton.jit
def dt_tag(base, ts):
    """A record's second word: ``base`` with the check ``(ts ^ 0x5A) & 0x7F`` in bits 56-62."""
    return base ^ ((ts & 0x7F) << 56)


@triton.jit
def dt_put(timers, base, per_lane, n, kind, region, payload):
    """Writes record ``n`` of the lane starting at word ``base``: (kind, region, payload), a
    record that opens what follows (begin, instant, lane start): the ``%smid`` read and the
    tag come before the ``%globaltimer`` read, so they stay out of the region."""
    if n < per_lane:
        tag = dt_tag_base(kind, region, payload)
        ts = dt_now()
        tl.store(timers + base + 2 * n, ts)
        tl.store(timers + base + 2 * n + 1, dt_tag(tag, ts))
    else:
        tl.atomic_add(timers + 2, 1)


@triton.jit
def dt_put_close(timers, base, per_lane, n, kind, region, payload):
    """:func:`dt_put` for a record that closes what precedes it (end, lane finish): the
    ``%globaltimer`` read comes first."""
    ts = dt_now()
    if n < per_lane:
        tl.store(timers + base + 2 * n, ts)
        tl.store(timers + base + 2 * n + 1, dt_tag(dt_tag_base(kind, region, payload), ts))
    else:
        tl.atomic_add(timers + 2, 1)


@triton.jit
def dt_init(timers):
    """Lays out the lanes (one per program), writes the header words 3-5 from program 0
    and the lane's start record (record 0). Returns (base word, records per lane)."""
    n0 = tl.num_programs(0)
    n1 = tl.num_programs(1)
    n2 = tl.num_programs(2)
    blocks = (n0 * n1 * n2).to(tl.int64)
    block = (tl.program_id(0) + n0 * (tl.program_id(1) + n1 * tl.program_id(2))).to(tl.int64)
    capacity = tl.load(timers + 1) & 0xFFFFFFFF
    per_lane = capacity // blocks
    if block == 0:
        tl.store(timers + 3, blocks | (1 << 32) | (1 << 48) | (1 << 56))
        tl.store(timers + 4, 1 | (1 << 32))
        tl.store(timers + 5, per_lane | (blocks << 32))
    base = 8 + 2 * block * per_lane
    dt_put(timers, base, per_lane, 0, 3, 0, block)
    return base, per_lane


@triton.jit
def dt_begin(timers, base, per_lane, n, region, payload):
    dt_put(timers, base, per_lane, n, 0, region, payload)


@triton.jit
def dt_end(timers, base, per_lane, n, region, payload):
    dt_put_close(timers, base, per_lane, n, 1, region, payload)


@triton.jit
def dt_instant(timers, base, per_lane, n, region, payload):
    dt_put(timers, base, per_lane, n, 2, region, payload)


@triton.jit
def dt_finish(timers, base, per_lane, n):
    dt_put_close(timers, base, per_lane, n, 3, 1, 0)
