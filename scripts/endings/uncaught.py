"""Ends with an uncaught exception after 5 profiled steps and no gmprof.finish().

    python3 uncaught.py OUT gmprof   # the gmprof module (C ABI): gmprof.init, gmprof.range
    python3 uncaught.py OUT nvtx     # torch.cuda.nvtx ranges, for gmprof run
The outputs must hold 5 'step' ranges of 3 kernels each.
"""
import sys

import torch

out, how = sys.argv[1], sys.argv[2]
if how == "gmprof":
    import gmprof

    gmprof.init(mode="trace", output_dir=out)
    scope = gmprof.range
else:
    import contextlib

    @contextlib.contextmanager
    def scope(name):
        torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            torch.cuda.nvtx.range_pop()

x = torch.ones(1 << 20, device="cuda")
for _ in range(5):
    with scope("step"):
        x = (x * 2).sqrt().add(1)  # 3 kernels
torch.cuda.synchronize()
raise RuntimeError("uncaught on purpose")
