"""Hugging Face's GPT-2 (transformers' GPT2LMHeadModel, unmodified) trained for a few steps,
for `gmprof run` under every way PyTorch runs it: eager, torch.compile, and
torch.compile(mode="reduce-overhead") (Inductor's CUDA graph trees).

    python3 scripts/graphs/hf_gpt2.py [--steps N] [--mode eager|compile|cudagraphs]
                                      [--layers L] [--batch B] [--seq T]
                                      [--adamw plain|foreach|fused] [--amp] [--clip NORM]
                                      [--measure-from STEP] [--attn sdpa|eager]

The model is GPT-2 small's configuration (12 layers, 768 wide, vocabulary 50 257) from
`GPT2Config`, initialised from a fixed seed: no weights are downloaded. Tokens are random,
from the same seed. Each step is an NVTX range "step" (gmprof run turns NVTX ranges into
ranges; `--torch-steps` is not needed). Deterministic algorithms are on, so that a run under
gmprof can be compared bit for bit with a native one: the script prints each step's loss as
its exact float32 bits and, at the end,

    hf_gpt2: mode=M steps=N loss_bits=0x... params_sha256=...

where params_sha256 hashes every parameter's bytes after the last step.
"""

import argparse
import hashlib
import os
import struct

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--mode", choices=["eager", "compile", "cudagraphs"], default="cudagraphs")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--adamw", choices=["plain", "foreach", "fused"], default="plain",
                    help="AdamW's implementation (plain: for-loop, bit-reproducible; foreach: "
                         "PyTorch's default on CUDA)")
    ap.add_argument("--amp", action="store_true", help="forward and loss under bf16 autocast")
    ap.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa",
                    help="transformers' attention: sdpa (its default; PyTorch's memory-efficient "
                         "attention, whose backward is not deterministic) or eager (matmuls and softmax)")
    ap.add_argument("--clip", type=float, default=0.0, help="clip_grad_norm_ to this norm (0: off)")
    ap.add_argument("--measure-from", type=int, default=-1,
                    help="steps from this one on are also inside an NVTX range 'measured' (for ncu --nvtx "
                         "--nvtx-include measured/: the compiled, replayed steps only)")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    config = GPT2Config(n_layer=args.layers, attn_pdrop=0.0, embd_pdrop=0.0, resid_pdrop=0.0)
    config._attn_implementation = args.attn
    model = GPT2LMHeadModel(config).cuda()
    print(f"hf_gpt2: attention {model.config._attn_implementation}", flush=True)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=args.adamw == "fused",
                            foreach=args.adamw == "foreach")
    gen = torch.Generator(device="cpu").manual_seed(1)
    data = [
        torch.randint(0, config.vocab_size, (args.batch, args.seq), generator=gen).cuda() for _ in range(4)
    ]

    def loss_of(tokens):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.amp):
            return model(input_ids=tokens, labels=tokens).loss

    if args.mode == "compile":
        loss_of = torch.compile(loss_of)
    elif args.mode == "cudagraphs":
        loss_of = torch.compile(loss_of, mode="reduce-overhead")

    loss = None
    for step in range(args.steps):
        measured = 0 <= args.measure_from <= step
        if measured:
            torch.cuda.nvtx.range_push("measured")
        torch.cuda.nvtx.range_push("step")
        if args.mode == "cudagraphs":
            torch.compiler.cudagraph_mark_step_begin()
        loss = loss_of(data[step % len(data)])
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.nvtx.range_pop()
        if measured:
            torch.cuda.nvtx.range_pop()
        value = loss.detach().float().item()
        print(f"hf_gpt2: step {step} loss {value:.6f} bits 0x{struct.unpack('<I', struct.pack('<f', value))[0]:08x}",
              flush=True)
    torch.cuda.synchronize()
    digest = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(p.detach().float().cpu().numpy().tobytes())
    value = loss.detach().float().item()
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    print(f"hf_gpt2: mode={args.mode} steps={args.steps} loss_bits=0x{bits:08x} params_sha256={digest.hexdigest()}")


if __name__ == "__main__":
    main()
