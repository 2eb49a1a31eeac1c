"""A small PyTorch program for `gmprof run --probe` (scripts/gpu/probe-validate.sh): a
torch.compile'd elementwise function (a Triton kernel), a matmul (cuBLAS) and a softmax
(aten). Prints a hash of each result so a probed run can be compared bit for bit."""
import hashlib

import torch


@torch.compile
def fused(x, y):
    return torch.relu(x + y) * 0.5


def digest(t):
    return hashlib.sha1(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


torch.manual_seed(0)
x = torch.randn(1 << 22, device="cuda")
y = torch.randn(1 << 22, device="cuda")
w = torch.randn(1024, 1024, device="cuda")
for step in range(3):
    torch.cuda.nvtx.range_push(f"step {step}")
    z = fused(x, y)
    m = w @ w
    s = torch.softmax(m, dim=1)
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("fused", digest(z))
print("matmul", digest(m))
print("softmax", digest(s))
