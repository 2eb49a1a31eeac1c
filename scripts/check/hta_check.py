#!/usr/bin/env python3
"""Run Holistic Trace Analysis (HTA) on gmprof's Kineto traces and check its numbers
against gmprof's own tables.

    hta_check.py RUN_DIR [--tolerance 0.001] [--expect-comm]

RUN_DIR is a run's output directory: one directory per rank (or RUN_DIR itself), each
holding the trace.json that `gmprof run --trace-format kineto` wrote and gmprof's
kernels.csv and transfers.csv (or report.json). This script installs nothing: HTA
(`pip install holistictraceanalysis`) must be importable. HTA reads every *.json of a
directory as a trace, report.json included, so the traces are handed to it by rank.

HTA rounds nanosecond timestamps to whole microseconds unless HTA_DISABLE_NS_ROUNDING=1;
the script sets it (gmprof's traces keep nanoseconds, and the comparison is to 0.1 %).

Checks, per rank:
* the trace is a Kineto trace: distributedInfo.rank, unique across the run;
* HTA's temporal breakdown, GPU kernel breakdown, communication/computation overlap and
  idle-time breakdown run without error;
* kernel breakdown: for every kernel name (memcpy and memset too), HTA's total time equals
  gmprof's (kernels.csv / transfers.csv duration_ns, summed), and so do the rank's totals of
  computation, communication and memory kernels; with --expect-comm, the rank has NCCL
  (communication) kernels;
* temporal breakdown: HTA's compute time, idle time and kernel time equal those of gmprof's
  rows (the union of computation kernels' [start, end), the span of all GPU work, the gaps);
* comm/comp overlap: HTA's percentage equals the share of the communication kernels' time
  that computation kernels ran beside, from gmprof's rows (without communication kernels
  HTA's is NaN, 0 / 0);
* idle time: per stream, HTA's idle time (host wait, kernel wait and other together) equals
  the gaps between gmprof's rows of that stream.

gmprof's rows are classified as HTA classifies kernels (by name: `^nccl.*Kernel`
communication, Memcpy/Memset memory, the rest computation). Prints one line per check and
exits 1 when a number disagrees, 2 when the input is not a run of Kineto traces.
"""
import argparse
import csv
import json
import os
import re
import sys
from collections import defaultdict

# Before HTA is imported: keep nanoseconds.
os.environ.setdefault("HTA_DISABLE_NS_ROUNDING", "1")

COMM_RE = re.compile(r"^nccl.*Kernel")
MEMORY_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
NOT_COMPUTE_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")

# gmprof's transfer kinds as the Kineto trace names them.
TRANSFER_NAMES = {
    "memcpy_htod": "Memcpy HtoD",
    "memcpy_dtoh": "Memcpy DtoH",
    "memcpy_dtod": "Memcpy DtoD",
    "memcpy_ptop": "Memcpy PtoP",
    "memcpy_other": "Memcpy Other",
    "memset": "Memset",
}


class BadInput(Exception):
    pass


def kernel_type(name):
    """HTA's hta.utils.utils.get_kernel_type, by name."""
    if COMM_RE.match(name):
        return "COMMUNICATION"
    if MEMORY_RE.match(name):
        return "MEMORY"
    if not NOT_COMPUTE_RE.match(name):
        return "COMPUTATION"
    return "OTHER"


def read_csv(path):
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    return list(csv.DictReader(lines))


def number(value):
    return None if value in ("", None) else int(value)


def gmprof_rows(rank_dir):
    """gmprof's timed GPU rows of a rank: (name, stream, start_ns, end_ns, duration_ns)."""
    kernels_csv = os.path.join(rank_dir, "kernels.csv")
    report_json = os.path.join(rank_dir, "report.json")
    rows = []
    if os.path.exists(kernels_csv):
        kernels = read_csv(kernels_csv)
        transfers_csv = os.path.join(rank_dir, "transfers.csv")
        transfers = read_csv(transfers_csv) if os.path.exists(transfers_csv) else []
    elif os.path.exists(report_json):
        with open(report_json) as f:
            report = json.load(f)
        kernels, transfers = report.get("kernels", []), report.get("transfers", [])
    else:
        raise BadInput(f"{rank_dir}: no kernels.csv or report.json (gmprof's tables) beside trace.json")
    for k in kernels:
        if k.get("granularity", "kernel") not in ("kernel", "graph_node"):
            continue
        times = [number(k.get(c)) for c in ("start_ns", "end_ns", "duration_ns")]
        if None in times or k.get("stream_id") in ("", None):
            continue
        name = k.get("kernel_name") or k.get("mangled_name") or "<unknown kernel>"
        rows.append((name, int(k["stream_id"]), *times))
    for t in transfers:
        times = [number(t.get(c)) for c in ("start_ns", "end_ns", "duration_ns")]
        if None in times or t.get("stream_id") in ("", None):
            continue
        rows.append((TRANSFER_NAMES[t["kind"]], int(t["stream_id"]), *times))
    return rows


def union(intervals):
    """The merged [start, end) intervals."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def length(intervals):
    return sum(end - start for start, end in intervals)


def intersection(a, b):
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def find_traces(run_dir):
    """{rank: (trace path, its directory)} of every trace.json in RUN_DIR and its subdirectories."""
    dirs = [run_dir] + sorted(
        os.path.join(run_dir, d) for d in os.listdir(run_dir) if os.path.isdir(os.path.join(run_dir, d))
    )
    found = {}
    for d in dirs:
        path = os.path.join(d, "trace.json")
        if not os.path.exists(path):
            continue
        try:
            with open(path) as f:
                trace = json.load(f)
        except (OSError, ValueError) as e:
            raise BadInput(f"{path}: not JSON: {e}")
        info = trace.get("distributedInfo") if isinstance(trace, dict) else None
        if not isinstance(info, dict) or not isinstance(info.get("rank"), int):
            raise BadInput(
                f"{path}: not a Kineto trace with distributedInfo.rank (write it with gmprof run --trace-format "
                "kineto, in a process with a rank: RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK or LOCAL_RANK)"
            )
        rank = info["rank"]
        if rank in found:
            raise BadInput(f"{path} and {found[rank][0]} are both rank {rank}")
        found[rank] = (path, d)
    if not found:
        raise BadInput(f"{run_dir}: no trace.json in it or in its subdirectories")
    return found


class Checks:
    def __init__(self, tolerance):
        self.tolerance = tolerance
        self.failed = 0

    def close(self, what, hta, gmprof, absolute=0.01):
        """HTA's number (µs) against gmprof's (µs): within the tolerance, or `absolute` µs."""
        ok = abs(hta - gmprof) <= max(self.tolerance * abs(gmprof), absolute)
        self.say(ok, f"{what}: HTA {hta:.3f}, gmprof {gmprof:.3f}")

    def say(self, ok, line):
        print(("ok    " if ok else "FAIL  ") + line)
        if not ok:
            self.failed += 1


def check(run_dir, tolerance, expect_comm):
    traces = find_traces(run_dir)
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_files={r: p for r, (p, _) in traces.items()}, trace_dir=run_dir)
    ranks = sorted(traces)
    checks = Checks(tolerance)
    checks.say(analysis.t.get_ranks() == ranks, f"HTA read ranks {analysis.t.get_ranks()} (traces of ranks {ranks})")

    temporal = analysis.get_temporal_breakdown(visualize=False)
    type_df, kernel_df = analysis.get_gpu_kernel_breakdown(
        visualize=False, duration_ratio=1.0, num_kernels=10**9, include_memory_kernels=True
    )
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    idle, _ = analysis.get_idle_time_breakdown(ranks=ranks, visualize=False)
    print(f"HTA ran: temporal breakdown, kernel breakdown ({len(kernel_df)} rows), comm/comp overlap, idle time")

    for rank in ranks:
        rows = gmprof_rows(traces[rank][1])
        print(f"-- rank {rank}: {len(rows)} timed GPU rows in gmprof's tables")
        mine = defaultdict(int)
        for name, _, _, _, dur in rows:
            mine[name] += dur
        theirs = kernel_df[kernel_df["rank"] == rank]
        hta_sums = dict(zip(theirs["name"], theirs["sum (us)"]))
        for name in sorted(set(mine) | set(hta_sums)):
            short = name if len(name) <= 60 else name[:57] + "..."
            checks.close(f"rank {rank} kernel {short}", float(hta_sums.get(name, 0.0)), mine.get(name, 0) / 1000.0)
        by_type = defaultdict(int)
        for name, dur in mine.items():
            by_type[kernel_type(name)] += dur
        for kind in ("COMPUTATION", "COMMUNICATION", "MEMORY"):
            hta = float(theirs[theirs["kernel_type"] == kind]["sum (us)"].sum())
            checks.close(f"rank {rank} {kind.lower()} total", hta, by_type[kind] / 1000.0)
        checks.close(f"rank {rank} all GPU time", float(theirs["sum (us)"].sum()), sum(mine.values()) / 1000.0)
        if expect_comm:
            checks.say(by_type["COMMUNICATION"] > 0, f"rank {rank} has NCCL kernels (communication): {by_type['COMMUNICATION']} ns")

        spans = [(start, end) for _, _, start, end, _ in rows]
        compute = union((s, e) for n, _, s, e, _ in rows if kernel_type(n) == "COMPUTATION")
        comm = union((s, e) for n, _, s, e, _ in rows if kernel_type(n) == "COMMUNICATION")
        kernel_time = max(e for _, e in spans) - min(s for s, _ in spans)
        t = temporal[temporal["rank"] == rank].iloc[0]
        checks.close(f"rank {rank} temporal kernel_time", float(t["kernel_time(us)"]), kernel_time / 1000.0)
        checks.close(f"rank {rank} temporal compute_time", float(t["compute_time(us)"]), length(compute) / 1000.0)
        idle_ns = kernel_time - length(union(spans))
        checks.close(f"rank {rank} temporal idle_time", float(t["idle_time(us)"]), idle_ns / 1000.0)

        pct = float(overlap[overlap["rank"] == rank]["comp_comm_overlap_pctg"].iloc[0])
        if comm:
            mine_pct = 100.0 * intersection(compute, comm) / length(comm)
            checks.close(f"rank {rank} comm/comp overlap %", pct, mine_pct, absolute=0.01)
        else:
            # 0 / 0 in HTA: no communication kernel to overlap.
            checks.say(pct != pct, f"rank {rank} comm/comp overlap: no communication kernels, HTA says {pct}")

        per_stream = defaultdict(list)
        for _, stream, start, end, _ in rows:
            per_stream[stream].append((start, end))
        r_idle = idle[idle["rank"] == rank]
        for stream, intervals in sorted(per_stream.items()):
            intervals.sort()
            gaps = sum(b[0] - a[1] for a, b in zip(intervals, intervals[1:]))
            hta = float(r_idle[r_idle["stream"] == stream]["idle_time"].sum())
            checks.close(f"rank {rank} stream {stream} idle time", hta, gaps / 1000.0)
    return checks.failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--tolerance", type=float, default=0.001, help="relative (default 0.001: 0.1 %%)")
    parser.add_argument(
        "--expect-comm", action="store_true", help="fail when a rank has no communication (NCCL) kernels"
    )
    args = parser.parse_args()
    try:
        failed = check(os.path.abspath(args.run_dir), args.tolerance, args.expect_comm)
    except BadInput as e:
        print(f"hta_check: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"hta_check: HTA is not importable ({e}): pip install holistictraceanalysis", file=sys.stderr)
        return 2
    if failed:
        print(f"hta_check: {failed} check(s) disagree", file=sys.stderr)
        return 1
    print("hta_check: HTA's numbers agree with gmprof's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
