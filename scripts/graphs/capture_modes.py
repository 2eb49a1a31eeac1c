"""A training step captured with `torch.cuda.graph` in a chosen capture mode, for checking that
`gmprof run` never breaks a capture (issue 43): global, thread_local and relaxed capture
modes, stream-ordered allocations inside the capture (PyTorch's cudaMallocAsync allocator
backend turns the step's allocations into graph memory nodes), and a Triton kernel (PTX, so
gmprof's PTX probes can build it into the graph) beside cuBLAS GEMMs and aten kernels. Triton
refuses the async backend's pointers (natively too), so with --alloc async the input is
scaled by aten instead.

    python3 scripts/graphs/capture_modes.py [--capture global|thread_local|relaxed]
                                            [--alloc native|async] [--steps N]

The step (a Triton kernel that scales the input, a 3-layer MLP forward, MSE loss, backward,
SGD) is warmed up on a side stream, captured once and replayed every step with new inputs
copied into the static tensors, the pattern of PyTorch's CUDA graphs documentation. Each step
is an NVTX range "step". At the end the script prints

    capture_modes: capture=C alloc=A steps=N loss_bits=0x... params_sha256=...

(the last step's loss as its float32 bits, and a hash of every parameter's bytes), so that a
run under gmprof can be compared bit for bit with a native one.
"""

import argparse
import hashlib
import os
import struct
import sys


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--capture", choices=["global", "thread_local", "relaxed"], default="global")
    ap.add_argument("--alloc", choices=["native", "async"], default="native",
                    help="PyTorch's allocator backend: its caching allocator, or cudaMallocAsync "
                         "(stream-ordered allocations, captured as graph memory nodes)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--nvtx-in-capture", action="store_true",
                    help="push and pop an NVTX range around the step inside the capture too (a "
                         "profiler's range that opens and closes while the stream captures)")
    return ap.parse_args()


args = parse()
if args.alloc == "async":
    # Must be set before CUDA is initialised.
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * factor + 0.125, mask=mask)


def scale(x):
    if args.alloc == "async":
        # Triton refuses pointers from PyTorch's cudaMallocAsync backend ("cannot be accessed
        # from Triton"), natively too: the same arithmetic in aten.
        return x * 0.5 + 0.125
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 1024),)](x, out, n, 0.5, BLOCK=1024)
    return out


def main():
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    model = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(),
                          nn.Linear(2048, 512)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    loss_fn = nn.MSELoss()
    gen = torch.Generator(device="cuda").manual_seed(1)
    inputs = [torch.randn(256, 512, device="cuda", generator=gen) for _ in range(args.steps)]
    targets = [torch.randn(256, 512, device="cuda", generator=gen) for _ in range(args.steps)]
    static_x = torch.zeros(256, 512, device="cuda")
    static_y = torch.zeros(256, 512, device="cuda")

    def step():
        if args.nvtx_in_capture:
            torch.cuda.nvtx.range_push("captured_step")
        out = model(scale(static_x))
        loss = loss_fn(out, static_y)
        loss.backward()
        opt.step()
        if args.nvtx_in_capture:
            torch.cuda.nvtx.range_pop()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):  # warm-up, as PyTorch's documentation does before a capture
            static_x.copy_(inputs[i % args.steps])
            static_y.copy_(targets[i % args.steps])
            opt.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph, capture_error_mode=args.capture):
        static_loss = step()

    bits = 0
    for s in range(args.steps):
        torch.cuda.nvtx.range_push("step")
        static_x.copy_(inputs[s])
        static_y.copy_(targets[s])
        graph.replay()
        torch.cuda.nvtx.range_pop()
        bits = struct.unpack("<I", struct.pack("<f", static_loss.item()))[0]
    torch.cuda.synchronize()
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().numpy().tobytes())
    print(f"capture_modes: capture={args.capture} alloc={args.alloc} steps={args.steps} "
          f"loss_bits=0x{bits:08x} params_sha256={digest.hexdigest()}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
