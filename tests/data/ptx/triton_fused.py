# A Triton kernel compiled for sm_90 without a GPU; its PTX is tests/data/ptx/triton_fused_sm90.ptx.
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
@triton.jit
def fused_add_relu_scale(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x + y, 0.0) * 0.5, mask=mask)
src = triton.compiler.ASTSource(fn=fused_add_relu_scale, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 1024})
k = triton.compile(src, target=GPUTarget("cuda", 90, 32))
open("triton_fused_sm90.ptx", "w").write(k.asm["ptx"])

