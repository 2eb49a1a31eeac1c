"""In-kernel region timers in a Triton kernel, under gmprof.

    python python/examples/triton_device_timers.py [out-dir]

A load / compute / store kernel marks its regions with gmprof.triton_timers; the buffer is
a gmprof.device_timers.DeviceTimers tensor, collected right after the launch. It prints the
mean duration per region, checks that every program recorded exactly one lane, and writes
regions.csv, report.json and trace.json through gmprof.finish().
"""

import sys

import torch
import triton
import triton.language as tl

import gmprof
from gmprof.device_timers import DeviceTimers, durations
from gmprof.triton_timers import dt_begin, dt_end, dt_finish, dt_init

LOAD, COMPUTE, STORE = tl.constexpr(1), tl.constexpr(2), tl.constexpr(3)
NAMES = ["", "load", "compute", "store"]


@triton.jit
def scaled_sum(x_ptr, y_ptr, n, timers, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    base, per_lane = dt_init(timers)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    dt_begin(timers, base, per_lane, 1, LOAD, BLOCK * 4)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    dt_end(timers, base, per_lane, 2, LOAD, 0)
    dt_begin(timers, base, per_lane, 3, COMPUTE, ITERS)
    acc = tl.zeros([BLOCK], tl.float32)
    for _ in range(ITERS):
        acc = acc * 1.0001 + x
    dt_end(timers, base, per_lane, 4, COMPUTE, 0)
    dt_begin(timers, base, per_lane, 5, STORE, BLOCK * 4)
    tl.store(y_ptr + offs, acc, mask=mask)
    dt_end(timers, base, per_lane, 6, STORE, 0)
    dt_finish(timers, base, per_lane, 7)


def main() -> int:
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "gmprof-out-triton-timers"
    n, block = 1 << 20, 1024
    x = torch.ones(n, device="cuda")
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    gmprof.init(mode="trace", output_dir=out_dir)
    timers = DeviceTimers(capacity=1 << 14)
    grid = (triton.cdiv(n, block),)
    with gmprof.range("triton_timers"):
        scaled_sum[grid](x, y, n, timers.tensor, BLOCK=block, ITERS=2000)
        launch = timers.collect(NAMES)
    gmprof.finish()
    lanes = launch["spans"]["lanes"]
    ok = lanes["started"] == grid[0] and lanes["repeated"] == 0 and lanes["misplaced"] == 0
    for name, ds in sorted(durations(launch).items()):
        print("triton: %-8s count %5d mean %9.1f ns" % (name, len(ds), sum(ds) / len(ds)))
    print(
        "triton: programs %d lanes started %d finished %d torn %d overflow %d correlation_id %s -> %s"
        % (grid[0], lanes["started"], lanes["finished"], launch["torn"], launch["header"]["overflow"],
           launch["correlation_id"], "OK" if ok else "FAIL")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
