#!/usr/bin/env python3
"""Runs an unmodified PyTorch training script, optionally with what a user adds from outside.

  torch_launch.py [--compile-mode MODE] [--step-ranges] [--emit-nvtx] [--math-sdpa] SCRIPT [ARGS...]

--compile-mode MODE  every torch.compile call gets mode=MODE unless it names one
                     ("reduce-overhead" turns on CUDA graphs)
--step-ranges        an NVTX range "step" from the end of each optimizer step to the end of
                     the next (opened after the step returns, outside torch's own
                     Optimizer.step range), so every training
                     iteration after the first is one range; nothing in the script changes
                     (`gmprof run --torch-steps` does the same for every Python process)
--emit-nvtx          torch.autograd.profiler.emit_nvtx(): an NVTX range per aten op
--math-sdpa          the fused attention kernels of scaled_dot_product_attention turned off
                     (flash, memory-efficient and cuDNN): attention runs as separate matmuls
                     and a softmax, slower in that one place (gmprof diff's validation)
--deterministic      torch.use_deterministic_algorithms(True) (and cuBLAS's fixed
                     workspace), so that two runs compute bit-identical weights
--param-digest       at the end, print `param digest: SHA256` of the script's `raw_model`
                     or `model` (every parameter's bytes, in state_dict order): two runs
                     that computed the same weights print the same digest

SCRIPT runs as __main__ (runpy) with sys.argv = [SCRIPT, ARGS...], in the current directory.
Used by scripts/gpu/real-programs.sh with nanoGPT's train.py.
"""
import argparse
import atexit
import contextlib
import functools
import runpy
import sys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compile-mode")
    ap.add_argument("--step-ranges", action="store_true")
    ap.add_argument("--emit-nvtx", action="store_true")
    ap.add_argument("--math-sdpa", action="store_true")
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--param-digest", action="store_true")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    opts = ap.parse_args()

    if opts.deterministic:
        import os

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    if opts.deterministic:
        torch.use_deterministic_algorithms(True)

    if opts.compile_mode:
        original = torch.compile

        @functools.wraps(original)
        def compile_with_mode(*args, **kwargs):
            kwargs.setdefault("mode", opts.compile_mode)
            return original(*args, **kwargs)

        torch.compile = compile_with_mode

    if opts.math_sdpa:
        torch.backends.cuda.enable_flash_sdp(False)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
        if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
            torch.backends.cuda.enable_cudnn_sdp(False)

    if opts.step_ranges:
        state = {"open": False}

        def after_step(_optimizer, _args, _kwargs):
            if state["open"]:
                torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_push("step")
            state["open"] = True

        def close():
            if state["open"]:
                torch.cuda.nvtx.range_pop()
                state["open"] = False

        # After each step has returned, outside torch's own "Optimizer.step#..." range (which
        # emit_nvtx makes an NVTX range: a step post-hook would run inside it), as
        # gmprof run --torch-steps does (python/gmprof/_bootstrap/sitecustomize.py).
        from torch.optim.optimizer import Optimizer, register_optimizer_step_post_hook

        inner = getattr(Optimizer, "profile_hook_step", None)
        if callable(inner):

            def profile_hook_step(func):
                profiled = inner(func)

                @functools.wraps(profiled)
                def step_then_mark(*args, **kwargs):
                    out = profiled(*args, **kwargs)
                    after_step(args[0], args[1:], kwargs)
                    return out

                return step_then_mark

            Optimizer.profile_hook_step = staticmethod(profile_hook_step)
        else:
            register_optimizer_step_post_hook(after_step)
        atexit.register(close)

    sys.argv = [opts.script] + opts.args
    nvtx = torch.autograd.profiler.emit_nvtx() if opts.emit_nvtx else contextlib.nullcontext()
    with nvtx:
        names = runpy.run_path(opts.script, run_name="__main__")
    if opts.param_digest:
        import hashlib

        model = names.get("raw_model")
        if model is None:
            model = names.get("model")
        model = getattr(model, "_orig_mod", model)  # torch.compile's wrapper holds the module
        digest = hashlib.sha256()
        for name, tensor in model.state_dict().items():
            digest.update(name.encode())
            digest.update(tensor.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy().tobytes())
        print("param digest: " + digest.hexdigest(), flush=True)


if __name__ == "__main__":
    main()
