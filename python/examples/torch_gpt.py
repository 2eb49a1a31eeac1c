#!/usr/bin/env python3
"""A 6-layer GPT trained on random tokens under gmprof.torch, with checks against torch.profiler.

Subcommands (scripts/gpu/torch-validate.sh runs them all on a GPU):

* ``gmprof --mode per_kernel --out DIR --json FILE``: trains under ``gmprof.torch.profile``
  (schedule wait=2, active=3, repeat=1), loads the outputs and writes, as JSON, the kernel
  count of each step range and of each range path (kernels.csv), and the kernels found in
  a few module ranges.
* ``torch --json FILE``: the same training under torch.profiler (schedule wait=1, warmup=1,
  active=3, repeat=1: the same three steps), with gmprof.torch's ranges pushed as
  torch.profiler regions (``backend="record_function"``). Writes the kernels per
  ProfilerStep and per range path, computed from torch's trace the way gmprof's process range
  scope attributes them (a kernel belongs to the innermost region of the launching thread;
  a thread with none open gives it to the latest region open on any thread).
* ``compare GMPROF_JSON TORCH_JSON``: prints both side by side; exits 1 when a count differs
  or an expected kernel is missing.
* ``overhead --json FILE``: median step time without annotations, with gmprof.torch's hooks
  (forward hooks only; a no-op backend; NVTX ranges with no tool attached, at depth 3 and at
  all depths) and with ``torch.autograd.profiler.emit_nvtx``, interleaved in rounds.
* ``gmprof --backend nvtx``: the ranges as NVTX only, for ``gmprof run``; ``summarize DIR``
  then writes the same JSON from its output directory.

Needs PyTorch with CUDA and, for ``gmprof``, the gmprof package with libgmprof.so.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import gmprof  # the installed package (the wheel)
except ImportError:  # a checkout: python/gmprof
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
    import gmprof
import gmprof.torch  # noqa: E402

STEPS = 6
# cuda; "cpu" only to try the script's plumbing on a machine without a GPU.
DEVICE = os.environ.get("TORCH_GPT_DEVICE", "cuda")
# (range path, regular expression a kernel name in it must match)
EXPECTED = [
    ("step/GPT/wte", r"index|embedding|gather"),
    ("step/GPT/h.0/attn", r"flash|fmha|attention|attn|sdpa|softmax"),
    ("step/GPT/h.0/attn", r"gemm|nvjet|cutlass|xmma|sm\d+_"),
    ("step/GPT/h.0/mlp", r"gelu|Gelu"),
    ("step/GPT/h.5/ln_2", r"layer_norm|LayerNorm"),
    ("step/GPT/lm_head", r"gemm|nvjet|cutlass|xmma|sm\d+_"),
    ("step/backward/GPT/h.0/attn", r"bwd|backward|Backward|cutlassB|fmha|flash|sdpa"),
    ("step/backward/GPT/h.0/mlp", r"gelu_backward|GeluBackward|gelu"),
    ("step/backward/GPT/wte", r"embedding|index|scatter|sort|radix"),
    ("step/AdamW.step", r"multi_tensor|adam|Adam"),
]


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))


class MLP(nn.Module):
    def __init__(self, d: int, ratio: int = 4) -> None:
        super().__init__()
        self.c_fc = nn.Linear(d, ratio * d)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(ratio * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, mlp_ratio: int = 4) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d, mlp_ratio)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 4096, seq: int = 128, d: int = 256, heads: int = 4, layers: int = 6,
                 mlp_ratio: int = 4) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.h = nn.ModuleList(Block(d, heads, mlp_ratio) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def setup(batch: int = 8, seq: int = 128, vocab: int = 4096, mlp_ratio: int = 4):
    torch.manual_seed(0)
    model = GPT(vocab=vocab, seq=seq, mlp_ratio=mlp_ratio).to(DEVICE)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, vocab, (batch, seq), device=DEVICE)
    targets = torch.randint(0, vocab, (batch, seq), device=DEVICE)

    def train_step() -> None:
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, train_step


# --------------------------------------------------------------------------------------


def run_gmprof(args: argparse.Namespace) -> int:
    """Trains under gmprof.torch; with --backend nvtx gmprof is not started here: run the
    script under `gmprof run`, which turns the NVTX ranges into gmprof ranges, then
    `summarize` its directory."""
    model, train_step = setup(mlp_ratio=args.mlp_ratio)
    sched = gmprof.torch.schedule(wait=2, active=args.active, repeat=1)
    start = time.perf_counter()
    with gmprof.torch.profile(model, depth=3, mode=args.mode, output_dir=args.out, schedule=sched,
                              record_functions=False, backend=args.backend) as prof:
        for _ in range(2 + args.active + 1):
            train_step()
            prof.step()
        sync()
    elapsed = time.perf_counter() - start
    if args.backend != "gmprof":
        print("gmprof.torch (%s backend): %d ranges pushed, %.1f s, warnings %s" % (
            args.backend, prof.ranges_pushed, elapsed, prof.warnings))
        return 1 if prof.warnings or prof.errors else 0
    return summarize(prof.report(pandas=False), args.mode, args.json, elapsed, prof.warnings)


def run_summarize(args: argparse.Namespace) -> int:
    return summarize(gmprof.load(args.dir, pandas=False), args.mode, args.json, None, [])


def summarize(report, mode, json_path, elapsed, profile_warnings) -> int:
    steps = [r for r in report.ranges if r["path"] == "step"]
    per_path = {}
    names = {}
    for k in report.kernels:
        path = k["range_path"]
        if path == "<root>":
            continue
        per_path[path] = per_path.get(path, 0) + 1
        names.setdefault(path, set()).add(k["kernel_name"])
    expected = {}
    for path, pattern in EXPECTED:
        hits = sorted(n for n in names.get(path, ()) if re.search(pattern, n))
        expected["%s ~ /%s/" % (path, pattern)] = hits[:3]
    metric_cols = [c for c in (report.ranges[0].keys() if report.ranges else []) if "__" in c]
    measured = {}
    for r in report.ranges:
        if r["path"] in ("step", "step/GPT/h.0/attn", "step/backward/GPT/h.0/mlp", "step/AdamW.step") \
                and r["instance"] == 0:
            measured[r["path"]] = {c: r[c] for c in metric_cols}
    out = {
        "mode": mode,
        "seconds": elapsed,
        "step_kernels": [r["kernel_count"] for r in steps],
        "per_path": per_path,
        "expected": expected,
        "metrics": measured,
        "warnings": report.warnings,
        "profile_warnings": profile_warnings,
        "ranges": len(report.ranges),
    }
    with open(json_path, "w") as f:
        json.dump(out, f, indent=1, default=str)
    print("gmprof %s: %d ranges, steps' kernels %s, %s s, warnings %s" % (
        mode, len(report.ranges), out["step_kernels"], "%.1f" % elapsed if elapsed else "-",
        report.warnings + profile_warnings))
    for path in ("step/GPT/h.0/attn", "step/backward/GPT/h.0/attn", "step/backward/GPT/wte"):
        print("  %s: %s" % (path, sorted(names.get(path, ()))[:6]))
    for path, values in measured.items():
        print("  metrics of %s (instance 0): %s" % (path, values))
    return 0


class _Recorder(gmprof.torch.RecordFunctionBackend):
    """torch.profiler regions, and the names pushed (to tell them from torch's own)."""

    def __init__(self) -> None:
        super().__init__()
        self.names = set()

    def push(self, name: str) -> None:
        self.names.add(name)
        super().push(name)


def attribute(events, names):
    """Kernels per ProfilerStep and per region path, as gmprof's process scope attributes them."""
    spans = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                    and e.get("name") in names), key=lambda e: (e["ts"], -e["dur"]))
    steps = sorted((e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    path = {}
    for i, s in enumerate(spans):
        end = s["ts"] + s["dur"]
        enclosing = [o for o in spans[:i] if o["ts"] <= s["ts"] and end <= o["ts"] + o["dur"]]
        same = [o for o in enclosing if o["tid"] == s["tid"]]
        parent = max(same or enclosing, key=lambda o: o["ts"], default=None)
        path[id(s)] = s["name"] if parent is None else path[id(parent)] + "/" + s["name"]
    launches = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launches[e["args"]["correlation"]] = e
    per_path, per_step = {}, [0] * len(steps)
    for k in events:
        if k.get("cat") != "kernel":
            continue
        launch = launches.get(k.get("args", {}).get("correlation"))
        if launch is None:
            continue
        ts = launch["ts"]
        for i, s in enumerate(steps):
            if s["ts"] <= ts <= s["ts"] + s["dur"]:
                per_step[i] += 1
        open_ = [s for s in spans if s["ts"] <= ts <= s["ts"] + s["dur"]]
        same = [s for s in open_ if s["tid"] == launch["tid"]]
        owner = max(same or open_, key=lambda s: s["ts"], default=None)
        if owner is not None:
            per_path[path[id(owner)]] = per_path.get(path[id(owner)], 0) + 1
    return per_step, per_path


def run_torch(args: argparse.Namespace) -> int:
    model, train_step = setup()
    backend = _Recorder()
    tsched = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1)
    gsched = gmprof.torch.schedule(wait=2, active=3, repeat=1)
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, schedule=tsched) as tprof:
        with gmprof.torch.profile(model, depth=3, schedule=gsched, backend=backend, record_functions=False) as prof:
            for _ in range(STEPS):
                train_step()
                tprof.step()
                prof.step()
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        tprof.export_chrome_trace(trace)
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
    per_step, per_path = attribute(events, backend.names)
    with open(args.json, "w") as f:
        json.dump({"step_kernels": per_step, "per_path": per_path, "profile_warnings": prof.warnings}, f, indent=1)
    print("torch.profiler: kernels per ProfilerStep %s; %d range paths" % (per_step, len(per_path)))
    return 0


def run_compare(args: argparse.Namespace) -> int:
    with open(args.gmprof_json) as f:
        g = json.load(f)
    with open(args.torch_json) as f:
        t = json.load(f)
    ok = True
    print("[%s] kernels per step: gmprof %s, torch.profiler %s" % (g["mode"], g["step_kernels"], t["step_kernels"]))
    if g["step_kernels"] != t["step_kernels"] or len(g["step_kernels"]) != 3:
        ok = False
        print("  MISMATCH in kernels per step")
    paths = sorted(set(g["per_path"]) | set(t["per_path"]))
    differing = [(p, g["per_path"].get(p), t["per_path"].get(p)) for p in paths
                 if g["per_path"].get(p) != t["per_path"].get(p)]
    print("[%s] kernels per range path (3 steps): %d paths, %d differ" % (g["mode"], len(paths), len(differing)))
    for p in paths:
        if p.count("/") <= 2 or p.endswith("h.0/attn") or p.endswith("h.0/mlp") or p.endswith("wte"):
            print("  %-40s gmprof %5s  torch %5s" % (p, g["per_path"].get(p), t["per_path"].get(p)))
    for p, a, b in differing:
        print("  DIFFERS %-40s gmprof %s  torch %s" % (p, a, b))
    ok = ok and not differing
    for key, hits in g["expected"].items():
        print("  %s %s -> %s" % ("ok     " if hits else "MISSING", key, hits[:2]))
        ok = ok and bool(hits)
    if g["warnings"] or g["profile_warnings"] or t["profile_warnings"]:
        print("  warnings: %s %s %s" % (g["warnings"], g["profile_warnings"], t["profile_warnings"]))
        ok = False
    print("[%s] %s" % (g["mode"], "PASS" if ok else "FAIL"))
    return 0 if ok else 1


class _Null:
    def push(self, name: str) -> None:
        pass

    def pop(self) -> None:
        pass


def run_overhead(args: argparse.Namespace) -> int:
    """Step times per configuration, interleaved: every round runs each configuration once
    (5 warm-up steps, then ``--steps`` timed steps), so drifts hit all of them alike."""
    import contextlib

    model, train_step = setup()
    configs = [
        ("no annotations", contextlib.nullcontext, None),
        ("gmprof.torch forward hooks only, depth 3, NVTX",
         lambda: gmprof.torch.profile(model, depth=3, backend="nvtx", backward=False), (3, False)),
        ("gmprof.torch hooks, depth 3, no-op backend",
         lambda: gmprof.torch.profile(model, depth=3, backend=_Null()), (3, True)),
        ("gmprof.torch hooks, depth 3, NVTX", lambda: gmprof.torch.profile(model, depth=3, backend="nvtx"),
         (3, True)),
        ("gmprof.torch hooks, all depths, NVTX", lambda: gmprof.torch.profile(model, depth=None, backend="nvtx"),
         (None, True)),
        ("torch.autograd.profiler.emit_nvtx", torch.autograd.profiler.emit_nvtx, None),
    ]
    ranges = {}
    for label, _, shape in configs:
        if shape is not None:
            rec = gmprof.torch.RecordingBackend()
            with gmprof.torch.profile(model, depth=shape[0], backward=shape[1], backend=rec):
                train_step()
            ranges[label] = len(rec.pushed) - 1  # less the step range
    times = {label: [] for label, _, _ in configs}
    round_medians = {label: [] for label, _, _ in configs}
    for _ in range(args.rounds):
        for label, make, _ in configs:
            this = []
            with make():
                for i in range(5 + args.steps):
                    sync()
                    start = time.perf_counter()
                    train_step()
                    sync()
                    if i >= 5:
                        this.append(time.perf_counter() - start)
            times[label] += this
            round_medians[label].append(statistics.median(this) * 1e3)
    base = statistics.median(times["no annotations"]) * 1e3
    rows = []
    print("overhead: %d rounds x %d steps per configuration, interleaved; step time with a CUDA sync "
          "(%s, torch %s)" % (args.rounds, args.steps,
                              torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU", torch.__version__))
    for label, _, _ in configs:
        median = statistics.median(times[label]) * 1e3
        spread = round_medians[label]
        rows.append({"config": label, "median_ms": median, "round_medians_ms": spread,
                     "vs_no_annotations_ms": median - base, "ranges_per_step": ranges.get(label)})
        print("  %-48s median %7.3f ms  %+7.3f ms  (rounds %5.2f..%5.2f ms)  ranges/step %s" % (
            label, median, median - base, min(spread), max(spread), ranges.get(label, "-")))
    with open(args.json, "w") as f:
        json.dump(rows, f, indent=1)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gmprof")
    g.add_argument("--mode", default="per_kernel")
    g.add_argument("--out")
    g.add_argument("--json")
    g.add_argument("--backend", default="gmprof", choices=["gmprof", "nvtx"])
    g.add_argument("--active", type=int, default=3, help="profiled steps (default 3)")
    g.add_argument("--mlp-ratio", type=int, default=4,
                   help="MLP width / model width (default 4; 8 is the slower variant of gmprof diff's validation)")
    m = sub.add_parser("summarize")
    m.add_argument("dir")
    m.add_argument("--mode", required=True)
    m.add_argument("--json", required=True)
    t = sub.add_parser("torch")
    t.add_argument("--json", required=True)
    c = sub.add_parser("compare")
    c.add_argument("gmprof_json")
    c.add_argument("torch_json")
    o = sub.add_parser("overhead")
    o.add_argument("--json", required=True)
    o.add_argument("--steps", type=int, default=20)
    o.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    if args.cmd not in ("compare", "summarize") and DEVICE == "cuda" and not torch.cuda.is_available():
        print("torch_gpt.py: CUDA is not available", file=sys.stderr)
        return 1
    if args.cmd == "gmprof" and args.backend == "gmprof" and not args.json:
        p.error("gmprof --backend gmprof needs --json")
    commands = {"gmprof": run_gmprof, "summarize": run_summarize, "torch": run_torch, "compare": run_compare,
                "overhead": run_overhead}
    return commands[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
