#!/usr/bin/env python3
"""Check gmprof's CUDA graph outputs (scripts/gpu/graphs-validate.sh writes them).

    check_graphs.py steps OUT MODE STEPS KERNELS [--path step/work/block]
    check_graphs.py dram GRAPH_OUT EAGER_OUT [--path step] [--tolerance 0.02]
    check_graphs.py ncu OUT NCU_CSV MODE [--tolerance 0.02]
    check_graphs.py torch OUT KERNELS_PER_STEP STEPS

* steps: no kernel row is flagged; in every mode the instances of PATH ("step N/..." folded
  to PATH) hold STEPS x KERNELS kernel rows of granularity graph_node, each with a graph and
  node id, attributed to that range; per_kernel also has one whole-graph row per step with
  counters and graph_kernels == KERNELS; kernel_replay gives every node row its counters.
* dram: DRAM bytes (read + write) of the step ranges in a graph run are within the
  tolerance of the same ranges in the eager run (per_range).
* ncu: DRAM bytes per kernel node (kernel_replay; ncu --graph-profiling node) or per graph
  launch (per_kernel; ncu --graph-profiling graph) match ncu's, paired in launch order.
* torch: no flagged row, graph-node rows exist, and kernels per "step N" (graph nodes and
  eager kernels) equal torch.profiler's count.

Prints one line per check and exits 1 if any fails.
"""
import argparse
import csv
import os
import re
import statistics
import sys

DRAM = ("dram__bytes_read.sum", "dram__bytes_write.sum")
failures = []


def check(ok, text):
    print(("ok   " if ok else "FAIL ") + text)
    if not ok:
        failures.append(text)


def table(out, name):
    with open(os.path.join(out, name)) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def num(v):
    return float(v) if v not in ("", None) else None


def fold(path):
    return re.sub(r"step \d+", "step", path)


def dram(row):
    vals = [num(row.get(m)) for m in DRAM]
    return None if any(v is None for v in vals) else sum(vals)


def steps(a):
    k = table(a.out, "kernels.csv")
    flagged = [r for r in k if r["status"] != "ok"]
    check(not flagged, f"{a.mode}: {len(flagged)} flagged kernel rows of {len(k)}")
    nodes = [r for r in k if fold(r["range_path"]) == a.path and r["granularity"] == "graph_node"]
    check(len(nodes) == a.steps * a.kernels, f"{a.mode}: {len(nodes)} graph-node rows in {a.path}, expected {a.steps}x{a.kernels}")
    check(all(r["graph_id"] and r["graph_node_id"] for r in nodes), f"{a.mode}: every node row has a graph and node id")
    per_step = {}
    for r in nodes:
        per_step.setdefault(r["range_path"], 0)
        per_step[r["range_path"]] += 1
    check(sorted(set(per_step.values())) == [a.kernels], f"{a.mode}: kernels per step instance {sorted(set(per_step.values()))}")
    if a.mode == "per_kernel":
        whole = [r for r in k if r["granularity"] == "graph"]
        check(len(whole) == a.steps, f"per_kernel: {len(whole)} whole-graph rows, expected {a.steps}")
        check(all(dram(r) is not None and r["graph_kernels"] == str(a.kernels) for r in whole),
              "per_kernel: every whole-graph row has DRAM counters and lists its kernels")
    if a.mode == "kernel_replay":
        check(all(dram(r) is not None and num(r["duration_ns"]) for r in nodes),
              "kernel_replay: every node row has DRAM counters and a duration")
    first = sorted(per_step)[0] if per_step else None
    print(f"info {a.mode}: node rows of {first}: " + ", ".join(base(r["kernel_name"]) for r in nodes if r["range_path"] == first))
    t = table(a.out, "transfers.csv") if os.path.exists(os.path.join(a.out, "transfers.csv")) else []
    graph_t = [r for r in t if fold(r["range_path"]) == a.path]
    print(f"info {a.mode}: {len(graph_t)} transfer rows in {a.path}: "
          f"{sorted(set((r['kind'], r['status']) for r in graph_t))}")


def base(name):
    """A kernel's bare name: `scale` of `scale(float const*, ...)` or `void scale<1>(...)`."""
    name = (name or "").split("(")[0].split("<")[0].strip()
    return name.split(" ")[-1]


def step_dram(out, path):
    rows = [r for r in table(out, "ranges.csv") if fold(r["path"]) == path]
    vals = [dram(r) for r in rows]
    return vals


def dram_cmp(a):
    g, e = step_dram(a.graph_out, a.path), step_dram(a.eager_out, a.path)
    check(bool(g) and bool(e) and None not in g + e, f"dram: {len(g)} graph and {len(e)} eager step values, none blank")
    if not g or not e or None in g + e:
        return
    gm, em = statistics.median(g), statistics.median(e)
    rel = abs(gm - em) / em
    check(rel <= a.tolerance, f"dram: per_range step DRAM graph {gm/2**20:.1f} MiB vs eager {em/2**20:.1f} MiB ({rel*100:.2f} %)")


def ncu_values(path):
    """DRAM bytes per profiled result (ID), in order, from `ncu --csv --print-units base`."""
    with open(path) as f:
        lines = [line for line in f if line.startswith('"')]
    by_id = {}
    names = {}
    for r in csv.DictReader(lines):
        if r.get("Metric Name") in DRAM:
            v = float(r["Metric Value"].replace(",", ""))
            by_id[int(r["ID"])] = by_id.get(int(r["ID"]), 0.0) + v
            names[int(r["ID"])] = r.get("Kernel Name", "")
    return [(names[i], by_id[i]) for i in sorted(by_id)]


def ncu_cmp(a):
    k = table(a.out, "kernels.csv")
    want = "graph_node" if a.mode == "kernel_replay" else "graph"
    theirs = ncu_values(a.ncu_csv)
    # ncu profiles kernels only: in node mode, pair gmprof's rows of the same kernels in
    # launch order (kernel replay also measures a graph's memcpy and memset nodes).
    names = {base(n) for n, _ in theirs}
    rows = [r for r in k if r["granularity"] == want and (want == "graph" or base(r["kernel_name"]) in names)]
    ours = [dram(r) for r in rows]
    # The graph's results are the last len(ours) ncu results (the setup runs no kernels).
    theirs = theirs[-len(ours):] if ours else []
    check(len(ours) == len(theirs) and len(ours) > 0, f"ncu {a.mode}: {len(ours)} gmprof {want} rows, {len(theirs)} ncu results")
    if want == "graph_node":
        same = all(base(r["kernel_name"]) == base(n) for r, (n, _) in zip(rows, theirs))
        check(same, f"ncu {a.mode}: kernels pair up by name in launch order")
    diffs = [abs(o - t) / t for o, (_, t) in zip(ours, theirs) if o is not None and t > 0]
    if diffs:
        check(max(diffs) <= a.tolerance,
              f"ncu {a.mode}: DRAM bytes vs ncu median {statistics.median(diffs)*100:.2f} %, max {max(diffs)*100:.2f} %")


def torch(a):
    k = table(a.out, "kernels.csv")
    flagged = [r for r in k if r["status"] != "ok"]
    check(not flagged, f"torch: {len(flagged)} flagged kernel rows of {len(k)}")
    per_step, graph_nodes = {}, 0
    for r in k:
        if r["granularity"] in ("kernel", "graph_node") and fold(r["range_path"]).startswith("step"):
            top = r["range_path"].split("/")[0]
            per_step[top] = per_step.get(top, 0) + 1
            graph_nodes += r["granularity"] == "graph_node"
    counts = sorted(set(per_step.values()))
    check(graph_nodes > 0, f"torch: {graph_nodes} graph-node rows in the steps")
    check(len(per_step) == a.steps and counts == [a.kernels],
          f"torch: kernels per step {counts} over {len(per_step)} steps; torch.profiler {a.kernels}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("steps")
    s.add_argument("out"); s.add_argument("mode"); s.add_argument("steps", type=int); s.add_argument("kernels", type=int)
    s.add_argument("--path", default="step/work/block")
    d = sub.add_parser("dram")
    d.add_argument("graph_out"); d.add_argument("eager_out")
    d.add_argument("--path", default="step"); d.add_argument("--tolerance", type=float, default=0.02)
    n = sub.add_parser("ncu")
    n.add_argument("out"); n.add_argument("ncu_csv"); n.add_argument("mode")
    n.add_argument("--tolerance", type=float, default=0.02)
    t = sub.add_parser("torch")
    t.add_argument("out"); t.add_argument("kernels", type=int); t.add_argument("steps", type=int)
    a = p.parse_args()
    {"steps": steps, "dram": dram_cmp, "ncu": ncu_cmp, "torch": torch}[a.cmd](a)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
