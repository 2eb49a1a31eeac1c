"""A Triton matmul whose tiles need more than 48 KB of dynamic shared memory, for the probe
engine's check (scripts/gpu/probe-validate.sh, section 4).

Triton opts such a kernel into the larger shared memory with cuFuncSetAttribute
(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) when it loads it; a probed copy of the
kernel must get the same opt-in or its launch fails. Prints the kernel's shared memory, the
whether it matches torch.matmul and an output checksum (the probed run must print the
same lines as the plain one).

    python3 probe_big_shared.py [--size 1024] [--repeat 3]
"""
import argparse

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.size
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=torch.float16, generator=g)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16, generator=g)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    bm, bn, bk = 128, 128, 64
    grid = (n // bm, n // bn)
    for _ in range(args.repeat):
        kernel = matmul_kernel[grid](a, b, c, n, n, n, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=4, num_warps=8)
    torch.cuda.synchronize()
    shared = kernel.metadata.shared
    err = (c.float() - (a.float() @ b.float())).abs().max().item()
    # "key value" lines, as scripts/check/check_probe.py's `same` compares them.
    print("shared_bytes %d" % shared)
    print("shared_over_48KB %s" % (shared > 49152))
    print("matches_torch %s" % (err < 0.5))
    print("checksum %.6e" % c.float().sum().item())


if __name__ == "__main__":
    main()
