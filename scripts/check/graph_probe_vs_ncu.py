#!/usr/bin/env python3
"""Instruction counts of kernels probed inside CUDA graphs, against ncu and against the same
kernels' eager launches (issue 43).

    graph_probe_vs_ncu.py RUN_DIR [--ncu NCU_CSV] [--tol 0.01]

RUN_DIR: a `gmprof run --mode trace --probe exec_count` directory of a program that captures
CUDA graphs (probe_launches.csv with its graph_launches column, probes.csv, kernels.csv).
NCU_CSV: `ncu --graph-profiling node --csv --print-units base --print-kernel-base function
--metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum ...` of the same program (for example restricted with
`--nvtx --nvtx-include measured/` to its replayed steps).

Each graph node row (graph_launches > 0) has exec_count's --field (thread_instructions by
default) per graph launch. It is compared with
  1. the median of ncu's smsp__thread_inst_executed.sum (smsp__inst_executed.sum for
     --field instructions) over the launches of the same kernel name
     and launch shape (blocks x threads per block), and
  2. the same run's eager, PTX-probed launches of that kernel and shape (Inductor runs each
     kernel eagerly before it captures it).
Prints the relative differences (median, p90, max, within --tol), then the share of GPU time
(kernels.csv) whose kernels have probe counts: eager launches joined to probe rows, and graph
kernels whose name and shape a probed node has.
"""
import argparse
import csv
import re
import statistics
import sys
from collections import defaultdict


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(l for l in f if not l.startswith("#")))


def ncu_rows(path):
    """ncu's CSV, after whatever the program printed before its header."""
    with open(path, newline="") as f:
        lines = f.readlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), len(lines))
    return list(csv.DictReader(lines[start:]))


def dims(text):
    nums = [int(x) for x in re.findall(r"\d+", text or "")]
    out = 1
    for n in nums:
        out *= n
    return out


def summary(label, diffs, tol):
    if not diffs:
        print(f"{label}: nothing compared")
        return
    d = sorted(diffs)
    p90 = d[min(len(d) - 1, int(0.9 * len(d)))]
    within = sum(1 for x in d if x <= tol)
    print(
        f"{label}: {len(d)} node(s); median {statistics.median(d) * 100:.3f} %, p90 {p90 * 100:.3f} %, "
        f"max {d[-1] * 100:.3f} %; within {tol * 100:g} %: {within}/{len(d)}"
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--ncu")
    ap.add_argument("--tol", type=float, default=0.01)
    ap.add_argument("--source", default="", help="only rows of this source: ptx-probe or sass-metrics")
    ap.add_argument("--field", default="thread_instructions",
                    help="exec_count's field: thread_instructions (PTX and SASS paths) or instructions (SASS)")
    args = ap.parse_args()

    launches = rows(f"{args.run}/probe_launches.csv")
    # exec_count's PTX path counts thread_instructions (PTX instructions executed, per thread,
    # summed); its SASS path also counts warp-level instructions.
    totals = {}
    for t in rows(f"{args.run}/probes.csv"):
        if t["probe"] == "exec_count" and t["field"] == args.field:
            totals[t["correlation_id"]] = int(t["total"])
    nodes, eager = [], defaultdict(list)
    statuses = defaultdict(int)
    shared = defaultdict(int)
    for l in launches:
        shape = (l["kernel"], int(l["blocks"]), int(l["threads"]))
        source = l.get("source") or ""
        if args.source and source != args.source:
            continue
        if l.get("graph_launches"):
            statuses[f'{source} {l["status"].split(":")[0]}'] += 1
            if "the sum over the" in l["status"]:
                # Several nodes of one function in a graph: CUPTI's SASS metrics count them
                # together; no single ncu node to compare with.
                shared[source] += 1
            elif int(l["graph_launches"]) > 0 and l["correlation_id"] in totals:
                nodes.append((shape, totals[l["correlation_id"]], int(l["graph_launches"])))
        elif l["status"] == "probed" and l["correlation_id"] in totals:
            eager[(source, shape)].append(totals[l["correlation_id"]])
    print(f"graph node rows: {dict(statuses)}; compared: {len(nodes)}; rows summing several nodes of one "
          f"function (not compared): {dict(shared)}")

    diffs, missing = [], 0
    sources = {s for s, _ in eager}
    for shape, n, _ in nodes:
        refs = [v for s in sources for v in eager.get((s, shape), [])]
        if not refs:
            missing += 1
            continue
        ref = statistics.median(refs)
        diffs.append(abs(n - ref) / ref if ref else float(n != 0))
    summary("graph nodes vs the same run's eager launches", diffs, args.tol)
    if missing:
        print(f"  {missing} node(s) without an eager launch of the same kernel and shape")

    if args.ncu:
        ncu = defaultdict(list)
        metric = "smsp__thread_inst_executed.sum" if args.field == "thread_instructions" else "smsp__inst_executed.sum"
        for r in ncu_rows(args.ncu):
            if r.get("Metric Name") != metric:
                continue
            shape = (r["Kernel Name"], dims(r.get("Grid Size")), dims(r.get("Block Size")))
            ncu[shape].append(float(r["Metric Value"].replace(",", "")))
        diffs, missing, worst = [], 0, []
        for shape, n, _ in nodes:
            if shape not in ncu:
                missing += 1
                continue
            ref = statistics.median(ncu[shape])
            d = abs(n - ref) / ref if ref else float(n != 0)
            diffs.append(d)
            worst.append((d, shape, n, ref))
        print(f"ncu: {sum(len(v) for v in ncu.values())} kernel result(s) of {len(ncu)} kernel shape(s)")
        summary(f"graph nodes vs ncu --graph-profiling node ({metric})", diffs, args.tol)
        if missing:
            print(f"  {missing} node(s) without an ncu result of the same kernel and shape")
        for d, shape, n, ref in sorted(worst, reverse=True)[:5]:
            print(f"  {d * 100:.3f} %  {shape[0][:60]} blocks {shape[1]} threads {shape[2]}: gmprof {n} ncu {ref:.0f}")

    # GPU time with probe counts.
    kernels = rows(f"{args.run}/kernels.csv")
    probed_ids = {l["correlation_id"] for l in launches if l["correlation_id"] in totals and not l.get("graph_launches")}
    node_shapes = {shape for shape, _, _ in nodes}
    total = eager_t = graph_t = graph_all = 0
    for k in kernels:
        dur = k.get("duration_ns") or ""
        if not dur:
            continue
        t = int(dur)
        total += t
        in_graph = bool(k.get("graph_node_id"))
        if in_graph:
            graph_all += t
            grid = int(k["grid_x"] or 1) * int(k["grid_y"] or 1) * int(k["grid_z"] or 1)
            block = int(k["block_x"] or 1) * int(k["block_y"] or 1) * int(k["block_z"] or 1)
            shape = (k.get("kernel_name", ""), grid, block)
            if shape in node_shapes:
                graph_t += t
        elif k["correlation_id"] in probed_ids:
            eager_t += t
    if total:
        print(
            f"GPU time with probe counts: {100 * (eager_t + graph_t) / total:.1f} % of {total / 1e6:.1f} ms "
            f"(eager launches {100 * eager_t / total:.1f} %, graph kernels {100 * graph_t / total:.1f} % of the "
            f"{100 * graph_all / total:.1f} % that ran in graphs)"
        )


if __name__ == "__main__":
    sys.exit(main())
