"""Two child processes that each launch their own kernels, for `gmprof run` (issue 15).

    python3 scripts/multi/two_children.py spawn|fork [KERNELS]

The parent creates no CUDA context (a launcher). Each child runs KERNELS (default 40)
elementwise additions inside an NVTX range "child N" on one GPU and prints
`two_children: child N pid P kernels K`. Under `gmprof run -o DIR` every child gets its own
output directory `DIR/<host>-pid<pid>/`, and the parent, which made no context, none.
"""
import multiprocessing as mp
import os
import sys


def child(index, kernels):
    import torch

    x = torch.ones(1 << 20, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(f"child {index}")
    for _ in range(kernels):
        x = x + 1.0
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    print(f"two_children: child {index} pid {os.getpid()} kernels {kernels}", flush=True)


def main():
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    kernels = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    ctx = mp.get_context(method)
    procs = [ctx.Process(target=child, args=(i, kernels)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    codes = [p.exitcode for p in procs]
    print(f"two_children: method={method} exit codes {codes}", flush=True)
    sys.exit(0 if all(c == 0 for c in codes) else 1)


if __name__ == "__main__":
    main()
