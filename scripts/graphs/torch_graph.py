"""A PyTorch training loop whose whole step runs as one CUDA graph, for `gmprof run`.

    python3 scripts/graphs/torch_graph.py STEPS [--compile] [--count]

Without --compile the step (forward, loss, backward, optimizer) is captured once with
`torch.cuda.graph` and replayed every step, the pattern of PyTorch's CUDA graphs
documentation. With --compile the model is `torch.compile(mode="reduce-overhead")`, whose
CUDA graph trees capture and replay the forward and backward.

Each step is an NVTX range "step N" (gmprof run turns NVTX ranges into gmprof ranges); the
graph replay sits inside "replay". With --count, torch.profiler (not gmprof) counts the CUDA
kernels of the steady-state steps and the script prints

    torch_graph: kernels_per_step=K source=torch.profiler

Without it, the script prints `torch_graph: steps=S done`.
"""

import argparse

import torch
import torch.nn as nn


def build(compile_model: bool):
    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [nn.Linear(1024, 1024), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(1024, 16)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    if compile_model:
        model = torch.compile(model, mode="reduce-overhead")
    return model, opt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("steps", type=int)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--count", action="store_true")
    args = ap.parse_args()

    model, opt = build(args.compile)
    loss_fn = nn.CrossEntropyLoss()
    batches = [(torch.randn(256, 1024, device="cuda"), torch.randint(0, 16, (256,), device="cuda")) for _ in range(4)]
    static_x = torch.empty_like(batches[0][0])
    static_y = torch.empty_like(batches[0][1])

    def step_body():
        out = model(static_x)
        loss = loss_fn(out, static_y)
        loss.backward()
        opt.step()
        return loss

    replay = None
    if not args.compile:
        # Warm up on a side stream (lazy initialisation, cuBLAS handles), then capture.
        static_x.copy_(batches[0][0])
        static_y.copy_(batches[0][1])
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=False)
                step_body()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=False)
        torch.cuda.nvtx.range_push("capture")
        with torch.cuda.graph(graph):
            step_body()
        torch.cuda.nvtx.range_pop()
        replay = graph.replay
    else:
        # reduce-overhead records its CUDA graphs (forward and backward) over the first steps.
        for i in range(3):
            static_x.copy_(batches[i % 4][0])
            static_y.copy_(batches[i % 4][1])
            opt.zero_grad(set_to_none=True)
            step_body()
        torch.cuda.synchronize()

    def one_step(i):
        torch.cuda.nvtx.range_push(f"step {i}")
        static_x.copy_(batches[i % 4][0])
        static_y.copy_(batches[i % 4][1])
        torch.cuda.nvtx.range_push("replay")
        if replay is not None:
            replay()
        else:
            opt.zero_grad(set_to_none=True)
            step_body()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()

    if args.count:
        from torch.profiler import ProfilerActivity, profile

        one_step(0)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(1, args.steps + 1):
                one_step(i)
        kernels = [
            e
            for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA
            and not e.name.startswith(("Memcpy", "Memset", "cudaMemcpy", "cudaMemset"))
        ]
        per_step = len(kernels) / args.steps
        print(f"torch_graph: kernels_per_step={per_step:g} source=torch.profiler", flush=True)
        return
    for i in range(args.steps):
        one_step(i)
    print(f"torch_graph: steps={args.steps} done", flush=True)


if __name__ == "__main__":
    main()
