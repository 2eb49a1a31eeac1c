#!/usr/bin/env python3
"""Train a tiny GPT-like model on random tokens, annotated with ranges.

Two ways to get per-range GPU metrics:

* default: ``torch.cuda.nvtx.range_push/pop`` around step/forward/backward/optimizer.
  No gmprof code at all: ``gmprof run -o OUT -- python3 torch_train.py`` injects gmprof
  and turns the NVTX ranges into gmprof ranges.
* ``--gmprof``: the one-line-change path. ``gmprof.range(...)`` replaces the NVTX calls and
  the script calls ``gmprof.init(mode=...)`` / ``gmprof.finish()`` itself.

    python3 python/examples/torch_train.py --steps 20
    python3 python/examples/torch_train.py --gmprof --mode trace --out gmprof-out
    gmprof run --mode trace -o gmprof-out -- python3 python/examples/torch_train.py

``--numbered`` names ranges as larger training programs do, with numbers: ``Train step N``
around each step and, through forward hooks, ``Layer M`` around each transformer block with
``Attention M`` inside it (NVTX only). gmprof's summary folds them into ``Train step #`` and
``Train step #/forward/Layer #/Attention #``, and iteration replay can take the steps as passes:

    gmprof run --mode per_kernel --iteration-replay "Train step *" --iterations 24 \
        --metrics dram__bytes_read.sum,... -o OUT -- python3 torch_train.py --numbered --steps 24

Two options exist to check gmprof's numbers against independent ones:

* ``--known-copy-mb N`` adds a range ``copy`` to each step that copies N MiB of float32
  through one elementwise kernel (``torch.mul(src, 2, out=dst)``): N MiB read and N MiB
  written, the analytic DRAM traffic. (A plain ``dst.copy_(src)`` is a DMA memcpy, not a
  kernel, so it has no counters.)
* ``--count-kernels FILE`` runs the loop under ``torch.profiler`` instead and writes, per
  range path, how many kernels were launched inside it (summed over steps), as JSON.

Needs PyTorch with CUDA and a GPU. With ``--gmprof``, libgmprof.so must be findable (see
python/README.md); ``PYTHONPATH=python`` or this script's own path fix finds the package.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    p.add_argument("--batch", type=int, default=16, help="sequences per batch (default 16)")
    p.add_argument("--seq", type=int, default=128, help="tokens per sequence (default 128)")
    p.add_argument("--vocab", type=int, default=8192, help="vocabulary size (default 8192)")
    p.add_argument("--d-model", type=int, default=256, help="model width (default 256)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    p.add_argument("--layers", type=int, default=2, help="transformer blocks (default 2)")
    p.add_argument("--gmprof", action="store_true", help="annotate with gmprof.range instead of NVTX")
    p.add_argument("--mode", default=None, help="gmprof mode: kernel_replay, per_kernel, per_range, trace")
    p.add_argument("--metrics", default=None, help="comma-separated gmprof metrics")
    p.add_argument("--out", default=None, help="gmprof output directory (default $GMPROF_OUT or gmprof-out)")
    p.add_argument("--sync-on-pop", action="store_true", help="gmprof: synchronize before each range closes")
    p.add_argument("--numbered", action="store_true",
                   help="NVTX ranges 'Train step N', and 'Layer M'/'Attention M' around each block (NVTX only)")
    p.add_argument("--known-copy-mb", type=int, default=0,
                   help="add a range 'copy' per step that copies this many MiB (analytic DRAM traffic)")
    p.add_argument("--count-kernels", default=None, metavar="FILE",
                   help="run under torch.profiler and write kernel counts per range path to FILE")
    return p.parse_args(argv)


def build_model(torch, args):
    nn = torch.nn

    class TinyGPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(args.vocab, args.d_model)
            self.pos = nn.Embedding(args.seq, args.d_model)
            layer = nn.TransformerEncoderLayer(
                d_model=args.d_model,
                nhead=args.heads,
                dim_feedforward=4 * args.d_model,
                dropout=0.0,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            self.blocks = nn.TransformerEncoder(layer, num_layers=args.layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(args.d_model)
            self.head = nn.Linear(args.d_model, args.vocab, bias=False)
            mask = torch.triu(torch.full((args.seq, args.seq), float("-inf")), diagonal=1)
            self.register_buffer("causal_mask", mask, persistent=False)

        def forward(self, idx):
            t = idx.shape[1]
            pos = torch.arange(t, device=idx.device)
            x = self.tok(idx) + self.pos(pos)
            x = self.blocks(x, mask=self.causal_mask[:t, :t], is_causal=True)
            return self.head(self.norm(x))

    return TinyGPT()


def kernel_counts(profiler, names):
    """Kernels launched inside each annotated range, by range path, summed over instances.

    A kernel belongs to every range whose CPU span contains its launch call (the runtime
    or driver event with the kernel's correlation id), on any thread: PyTorch launches
    backward kernels from its autograd thread while the main thread waits inside the
    ``backward`` range.
    """
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        profiler.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    spans = [e for e in events if e.get("cat") == "user_annotation" and e.get("name") in names]
    launches = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launches[e["args"]["correlation"]] = e["ts"]
    paths = {}
    for s in spans:
        # The path: the enclosing annotations on the same thread, outermost first.
        outer = [o for o in spans if o["tid"] == s["tid"] and o["ts"] <= s["ts"]
                 and s["ts"] + s["dur"] <= o["ts"] + o["dur"] and o is not s]
        outer.sort(key=lambda o: (o["ts"], -o["dur"]))
        paths[id(s)] = "/".join([o["name"] for o in outer] + [s["name"]])
    counts = {}
    for e in events:
        if e.get("cat") != "kernel":
            continue
        ts = launches.get(e.get("args", {}).get("correlation"))
        if ts is None:
            continue
        for s in spans:
            if s["ts"] <= ts <= s["ts"] + s["dur"]:
                counts[paths[id(s)]] = counts.get(paths[id(s)], 0) + 1
    return counts


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch  # imported here so that --help and imports work without torch

    if not torch.cuda.is_available():
        print("torch_train.py: CUDA is not available", file=sys.stderr)
        return 1

    if args.gmprof:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
        import gmprof

        def annotate(name):
            return gmprof.range(name)

    elif args.count_kernels:

        @contextlib.contextmanager
        def annotate(name):
            # torch.profiler sees record_function; the path is rebuilt from nesting.
            with torch.profiler.record_function(name):
                yield

    else:

        @contextlib.contextmanager
        def annotate(name):
            torch.cuda.nvtx.range_push(name)
            try:
                yield
            finally:
                torch.cuda.nvtx.range_pop()

    device = torch.device("cuda")
    torch.manual_seed(0)
    model = build_model(torch, args).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()

    # Random tokens, made once, so that the steps measure the model rather than data loading.
    data = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=device)
    inputs, targets = data[:, :-1], data[:, 1:]
    copy_src = copy_dst = None
    if args.known_copy_mb > 0:
        n = args.known_copy_mb * (1 << 20) // 4
        copy_src = torch.ones(n, device=device, dtype=torch.float32)
        copy_dst = torch.empty_like(copy_src)
    torch.cuda.synchronize()

    if args.gmprof:
        # Initialize after the CUDA context exists, so that gmprof attaches to it.
        gmprof.init(mode=args.mode, metrics=args.metrics, output_dir=args.out,
                    synchronize_on_pop=args.sync_on_pop)

    if args.numbered and not (args.gmprof or args.count_kernels):
        # One NVTX range per block and per attention, through forward hooks.
        # A hook that returns a value replaces the module's input or output: these return None.
        def hooks(module, name):
            def push(*_):
                torch.cuda.nvtx.range_push(name)

            def pop(*_):
                torch.cuda.nvtx.range_pop()

            module.register_forward_pre_hook(push)
            module.register_forward_hook(pop)

        for i, block in enumerate(model.blocks.layers):
            hooks(block, "Layer %d" % i)
            hooks(block.self_attn, "Attention %d" % i)

    model.train()
    profiler = None
    if args.count_kernels:
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        profiler = torch.profiler.profile(activities=acts)
        profiler.__enter__()
    start = time.perf_counter()
    loss = None
    for step in range(args.steps):
        with annotate("Train step %d" % step if args.numbered and not args.count_kernels else "step"):
            with annotate("forward"):
                logits = model(inputs)
                loss = loss_fn(logits.reshape(-1, args.vocab), targets.reshape(-1))
            with annotate("backward"):
                opt.zero_grad(set_to_none=True)
                loss.backward()
            with annotate("optimizer"):
                opt.step()
            if copy_src is not None:
                with annotate("copy"):
                    torch.mul(copy_src, 2.0, out=copy_dst)
            torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    if profiler is not None:
        profiler.__exit__(None, None, None)
        counts = kernel_counts(profiler, ["step", "forward", "backward", "optimizer", "copy"])
        with open(args.count_kernels, "w") as f:
            json.dump(counts, f, indent=2, sort_keys=True)
        print("torch.profiler kernel counts per range path: %s" % counts)

    print("%d steps in %.3f s (%.2f ms/step), final loss %.4f"
          % (args.steps, elapsed, 1e3 * elapsed / max(args.steps, 1), loss.item() if loss is not None else float("nan")))
    if args.gmprof:
        out = gmprof.finish()
        print("gmprof wrote %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
