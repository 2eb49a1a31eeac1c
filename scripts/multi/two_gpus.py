"""One process, two GPUs, for `gmprof run` (every context of a process profiled).

    python3 scripts/multi/two_gpus.py pipeline|data_parallel|alone [--steps N] [--count FILE]
                                      [--late-step K]

pipeline       a two-stage MLP: stage 0 on cuda:0, stage 1 on cuda:1; forward on GPU 0 then
               GPU 1, the loss on GPU 1, backward through both, AdamW on both.
data_parallel  nn.DataParallel over both GPUs (replicas run in worker threads).
alone          stage 1 of the pipeline alone on cuda:0, same shapes: its kernels are the
               ones the pipeline runs on GPU 1 (per-kernel counters compared across runs).

Ranges: "step" per iteration with "forward", "backward" and "optimizer" inside (NVTX).
--late-step K leaves cuda:1 untouched until step K (pipeline: its context is created in the
middle of the run, inside that step's forward).
--count FILE runs under torch.profiler instead (no gmprof) and writes the number of kernels
per device to FILE as JSON: the reference for gmprof's kernels.csv.
"""
import argparse
import json
import sys

import torch
import torch.nn as nn

DIM, HIDDEN, BATCH, LAYERS = 1024, 4096, 256, 3


def mlp(device):
    torch.manual_seed(0)
    layers = []
    for _ in range(LAYERS):
        layers += [nn.Linear(DIM, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, DIM)]
    return nn.Sequential(*layers).to(device)


def nvtx(name):
    return torch.cuda.nvtx.range(name)


def run(kind, steps, late_step):
    devices = [torch.device("cuda:0"), torch.device("cuda:1")]
    x = torch.randn(BATCH, DIM).to(devices[0])
    if kind == "pipeline":
        stage0 = mlp(devices[0])
        stage1 = None
        params = list(stage0.parameters())
        opts = [torch.optim.AdamW(params, lr=1e-4)]
    elif kind == "data_parallel":
        model = nn.DataParallel(mlp(devices[0]), device_ids=[0, 1])
        opts = [torch.optim.AdamW(model.parameters(), lr=1e-4)]
    else:  # alone: stage 1's work on cuda:0
        # The pipeline's stage 1 gets its input from stage 0, which needs its gradient.
        stage1 = mlp(devices[0])
        opts = [torch.optim.AdamW(stage1.parameters(), lr=1e-4)]
        h_in = torch.randn(BATCH, DIM).to(devices[0]).requires_grad_(True)
    for step in range(steps):
        if kind == "pipeline" and stage1 is None and step >= late_step:
            stage1 = mlp(devices[1])
            opts.append(torch.optim.AdamW(stage1.parameters(), lr=1e-4))
        with nvtx("step"):
            with nvtx("forward"):
                if kind == "pipeline":
                    h = stage0(x)
                    if stage1 is not None:
                        y = stage1(h.to(devices[1]))
                    else:
                        y = h
                elif kind == "data_parallel":
                    y = model(x)
                else:
                    y = stage1(h_in)
                loss = y.float().pow(2).mean()
            with nvtx("backward"):
                loss.backward()
            with nvtx("optimizer"):
                for o in opts:
                    o.step()
                    o.zero_grad(set_to_none=True)
            for d in range(torch.cuda.device_count() if kind != "alone" else 1):
                torch.cuda.synchronize(d)
    print(f"two_gpus: {kind} {steps} steps, loss {loss.item():.6f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["pipeline", "data_parallel", "alone"])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--count", help="count kernels per device with torch.profiler into this JSON file")
    ap.add_argument("--late-step", type=int, default=0)
    a = ap.parse_args()
    if a.kind != "alone" and torch.cuda.device_count() < 2:
        sys.exit("two_gpus: needs two GPUs")
    if not a.count:
        run(a.kind, a.steps, a.late_step)
        return
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run(a.kind, a.steps, a.late_step)
    counts, names, left_out = {}, {}, {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        name = e.name
        # Copies, sets and synchronizations are device events too, not kernels.
        # So are the GPU-side spans of record_function ranges (Optimizer.step#AdamW.step).
        annotation = getattr(e, "is_user_annotation", False)
        if name.startswith(("Memcpy", "Memset", "cudaMemcpy", "cudaMemset")) or "sync" in name.lower() or annotation:
            left_out[name] = left_out.get(name, 0) + 1
            continue
        key = str(e.device_index)
        counts[key] = counts.get(key, 0) + 1
        names.setdefault(key, []).append(name)
    json.dump({"kernels_per_device": counts, "names_per_device": names, "left_out": left_out}, open(a.count, "w"))
    print(f"two_gpus: torch.profiler kernels per device {counts}; not kernels: {left_out}", flush=True)


if __name__ == "__main__":
    main()
