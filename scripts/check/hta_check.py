#!/usr/bin/env python3
"""Run Holistic Trace Analysis (HTA) on gmprof's Kineto traces and check its numbers
against gmprof's own tables.

    hta_check.py RUN_DIR [--tolerance 0.001] [--expect-comm] [--expect-steps]

RUN_DIR is a run's output directory: one directory per rank (or RUN_DIR itself), each
holding the trace.json that `gmprof run --trace-format kineto` wrote and gmprof's
report.json beside it (its kernel, transfer and range rows). This script installs nothing:
HTA (`pip install holistictraceanalysis 'pandas<3'`) must be importable. HTA reads every
*.json of a directory as a trace, report.json included, so the traces are handed to it by
rank.

HTA rounds nanosecond timestamps to whole microseconds unless HTA_DISABLE_NS_ROUNDING=1;
the script sets it (gmprof's traces keep nanoseconds, and the comparison is to 0.1 %).

Which of gmprof's rows HTA sees: with two or more ProfilerStep#N events, HTA keeps only the
CPU events that start before the last step does and the GPU events one of those launched (by
`correlation`). gmprof's rows are filtered the same way from gmprof's own numbers: a kernel
row is kept when its launch (launch_ns) came before the push of the last step's range
(report.json's range row, which the ProfilerStep event names in args.step_range_id), a
memcpy or memset row when its call was stamped (call_ns) before it; rows without a call time
have no call event, so HTA drops them. With fewer steps HTA keeps every row, and so does the
check.

Checks, per rank:
* the trace is a Kineto trace: distributedInfo.rank, unique across the run;
* HTA's temporal breakdown, GPU kernel breakdown, communication/computation overlap,
  idle-time breakdown, CUDA kernel launch statistics and profiler steps run without error
  (and, with two or more steps, its critical path analysis of the first rank's first step,
  where the launch calls are named as HTA counts queues);
* steps: the trace's ProfilerStep#N events are the instances of the step range its
  otherData.steps names, as many as report.json has (each at its range's push and pop, to
  the ns); HTA's profiler steps are their numbers (the last left out when there are two or
  more); with --expect-steps, the rank has two or more;
* per step: HTA's GPU time of the iteration (its kernels, memcpys and memsets, by HTA's
  iteration column) equals the step range row's gpu_time_ns + transfer_time_ns;
* kernel breakdown: for every kernel name (memcpy and memset too), HTA's total time equals
  gmprof's (duration_ns of the rows kept, summed), and so do the rank's totals of
  computation, communication and memory kernels; with --expect-comm, the rank has NCCL
  (communication) kernels;
* launch statistics: HTA's rows (cudaLaunchKernel / cudaLaunchKernelExC and cudaMemcpyAsync /
  cudaMemsetAsync calls joined to their GPU events) are gmprof's kept rows launched by those
  functions (report.json's api_name, its _vNNNN suffix dropped as Kineto drops it): the
  same count, and the same sums of the call's duration (launch_end_ns - launch_ns, call_end_ns
  - call_ns; 0 where not stamped), of the GPU time, and of the launch delay (the GPU event's
  start less the call's end, at least 0);
* temporal breakdown: HTA's compute time, idle time and kernel time equal those of gmprof's
  rows (the union of computation kernels' [start, end), the span of all GPU work, the gaps);
* comm/comp overlap: HTA's percentage equals the share of the communication kernels' time
  that computation kernels ran beside, from gmprof's rows (without communication kernels
  HTA's is NaN, 0 / 0);
* idle time: per stream, HTA's idle time (host wait, kernel wait and other together) equals
  the gaps between gmprof's rows of that stream.

gmprof's rows are classified as HTA classifies kernels (by name: `^nccl.*Kernel`
communication, Memcpy/Memset memory, the rest computation). HTA 0.5.0's straggler analysis
is not run: it looks for communication kernels named `ncclKernel*`, and NCCL 2.19 and later
name theirs `ncclDevKernel*` (it fails with "attempt to get argmax of an empty sequence").
Prints one line per check and exits 1 when a number disagrees, 2 when the input is not a run
of Kineto traces.
"""
import argparse
import fnmatch
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
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
VERSION_RE = re.compile(r"_v\d{4,}$")

# gmprof's transfer kinds (as report.json spells them) as the Kineto trace names them.
TRANSFER_NAMES = {
    "memcpy_hto_d": "Memcpy HtoD",
    "memcpy_dto_h": "Memcpy DtoH",
    "memcpy_dto_d": "Memcpy DtoD",
    "memcpy_pto_p": "Memcpy PtoP",
    "memcpy_other": "Memcpy Other",
    "memset": "Memset",
}
# The calls HTA's launch statistics join to their GPU events.
LAUNCH_STAT_CALLS = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"}
# The calls HTA's queue length (and so its critical path) counts.
QUEUED_CALLS = LAUNCH_STAT_CALLS | {"cuLaunchKernel"}


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


def kineto_call_name(api):
    """The call's name as the trace gives it (CUPTI's _vNNNN dropped, as Kineto drops it)."""
    return VERSION_RE.sub("", api) if api and api.startswith("cuda") else api


class Row:
    """One of gmprof's timed GPU rows, with the call that made it."""

    def __init__(self, name, stream, start, end, dur, call, call_end, api, thread, kernel):
        self.name, self.stream, self.start, self.end, self.dur = name, stream, start, end, dur
        # The call: when it was stamped and returned (ns), its CUDA function, its thread.
        self.call, self.call_end, self.api, self.thread = call, call_end, api, thread
        self.kernel = kernel

    def call_dur(self):
        return self.call_end - self.call if self.call is not None and self.call_end is not None else 0

    def has_call_event(self):
        """Whether the trace has the call's event: a kernel's launch wherever it was stamped
        (named `kernel launch` without a name), a memcpy's or memset's call where it was."""
        stamped = self.call is not None and self.thread is not None
        return stamped and (self.kernel or self.api is not None)


def read_report(rank_dir):
    path = os.path.join(rank_dir, "report.json")
    if not os.path.exists(path):
        raise BadInput(f"{rank_dir}: no report.json (gmprof's tables) beside trace.json")
    with open(path) as f:
        return json.load(f)


def gmprof_rows(report):
    """gmprof's timed GPU rows of a rank: those with a place on a stream."""
    rows = []
    for k in report.get("kernels", []):
        if k.get("granularity", "kernel") not in ("kernel", "graph_node"):
            continue
        times = [k.get(c) for c in ("start_ns", "end_ns", "duration_ns")]
        if None in times or k.get("stream_id") is None or k.get("device_id") is None:
            continue
        name = k.get("kernel_name") or k.get("mangled_name") or "<unknown kernel>"
        call = (k.get("launch_ns"), k.get("launch_end_ns"), k.get("api_name"), k.get("thread"))
        rows.append(Row(name, k["stream_id"], *times, *call, kernel=True))
    for t in report.get("transfers", []):
        times = [t.get(c) for c in ("start_ns", "end_ns", "duration_ns")]
        if None in times or t.get("stream_id") is None:
            continue
        call = (t.get("call_ns"), t.get("call_end_ns"), t.get("api_name"), t.get("thread"))
        rows.append(Row(TRANSFER_NAMES[t["kind"]], t["stream_id"], *times, *call, kernel=False))
    return rows


def range_text(range_id):
    return f"{range_id['slot']}.{range_id['generation']}" if range_id else None


def step_rows(report, steps_info):
    """The range rows of report.json that are steps by otherData.steps (the rule of gmprof's
    kineto_steps): instances of the named range (outermost matches) or of the chosen path."""
    ranges = [r for r in report.get("ranges", []) if r.get("range_id")]
    if not steps_info:
        return []
    asked = steps_info["range"]
    if steps_info.get("chosen_by", "").startswith("the step range"):
        matched = {range_text(r["range_id"]) for r in ranges if fnmatch.fnmatchcase(r["name"], asked)}
        parents = {range_text(r["range_id"]): range_text(r.get("parent_id")) for r in ranges}

        def inside_a_match(r):
            at = range_text(r.get("parent_id"))
            for _ in range(len(ranges)):
                if at is None:
                    return False
                if at in matched:
                    return True
                at = parents.get(at)
            return False

        members = [r for r in ranges if range_text(r["range_id"]) in matched and not inside_a_match(r)]
    else:
        members = [r for r in ranges if r["path"] == asked]
    return [r for r in members if r.get("start_ns") is not None and r.get("end_ns") is not None]


def trace_steps(trace):
    """The trace's ProfilerStep#N events: (N, ts µs, dur µs, step_range_id)."""
    steps = []
    for e in trace.get("traceEvents", []):
        m = STEP_RE.match(e.get("name", "")) if e.get("cat") == "user_annotation" else None
        if m:
            steps.append((int(m.group(1)), e["ts"], e["dur"], e.get("args", {}).get("step_range_id")))
    return sorted(steps, key=lambda s: s[1])


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
    """{rank: (trace path, its directory, the trace)} of every trace.json in RUN_DIR and its
    subdirectories."""
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
        found[rank] = (path, d, trace)
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


def check_steps(checks, rank, trace, report, expect_steps):
    """The trace's steps against report.json's step range; returns gmprof's steps as
    (number, range row), in time order, and the push of the last one (ns) when HTA leaves
    the last step out (two or more steps), else None."""
    steps_info = trace.get("otherData", {}).get("steps")
    events = trace_steps(trace)
    expected = step_rows(report, steps_info)
    by_id = {range_text(r["range_id"]): r for r in expected}
    what = f"'{steps_info['range']}'" if steps_info else "none named in otherData.steps"
    checks.say(
        len(events) == len(expected) and (steps_info or {}).get("steps", 0) == len(events),
        f"rank {rank} ProfilerStep#N events: {len(events)} in the trace, {len(expected)} instances of the step "
        f"range in report.json ({what})",
    )
    if expect_steps:
        checks.say(len(events) >= 2, f"rank {rank} has two or more steps (HTA's iterations): {len(events)}")
    origin = trace.get("otherData", {}).get("origin_cupti_ns", 0)
    matched = []
    for number, ts, dur, range_id in events:
        row = by_id.get(range_id)
        # In integers: CUPTI's clock is Unix ns (about 1.8e18), where a float's step is 256 ns.
        at = (
            row
            and abs(origin + round(ts * 1000) - row["start_ns"]) <= 1
            and abs(round(dur * 1000) - (row["end_ns"] - row["start_ns"])) <= 1
        )
        checks.say(bool(at), f"rank {rank} ProfilerStep#{number} spans its step range {range_id} (push to pop)")
        if row:
            matched.append((number, row))
    cutoff = max(r["start_ns"] for _, r in matched) if len(events) >= 2 and matched else None
    return matched, cutoff


def check(run_dir, tolerance, expect_comm, expect_steps):
    traces = find_traces(run_dir)
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_files={r: p for r, (p, _, _) in traces.items()}, trace_dir=run_dir)
    ranks = sorted(traces)
    checks = Checks(tolerance)
    checks.say(analysis.t.get_ranks() == ranks, f"HTA read ranks {analysis.t.get_ranks()} (traces of ranks {ranks})")

    temporal = analysis.get_temporal_breakdown(visualize=False)
    type_df, kernel_df = analysis.get_gpu_kernel_breakdown(
        visualize=False, duration_ratio=1.0, num_kernels=10**9, include_memory_kernels=True
    )
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    idle, _ = analysis.get_idle_time_breakdown(ranks=ranks, visualize=False)
    launch_stats = analysis.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    hta_steps = [int(s) for s in analysis.get_profiler_steps()]
    print(
        f"HTA ran: temporal breakdown, kernel breakdown ({len(kernel_df)} rows), comm/comp overlap, idle time, "
        f"launch statistics, profiler steps {hta_steps}"
    )

    for rank in ranks:
        _, rank_dir, trace = traces[rank]
        report = read_report(rank_dir)
        steps, cutoff = check_steps(checks, rank, trace, report, expect_steps)
        numbers = [n for n, _ in steps]
        kept_steps = numbers[:-1] if cutoff is not None else numbers
        checks.say(
            sorted(kept_steps) == hta_steps,
            f"rank {rank} HTA's profiler steps {hta_steps}: gmprof's {numbers}"
            + (" less the last, which HTA leaves out" if cutoff is not None else ""),
        )
        all_rows = gmprof_rows(report)
        if cutoff is not None and rank == ranks[0]:
            # HTA builds the path on its queue lengths, which it counts from the launch calls it
            # knows by name: a report without launch names (written before gmprof kept them) has
            # none, and HTA fails on it.
            if any(r.has_call_event() and kineto_call_name(r.api) in QUEUED_CALLS for r in all_rows):
                cp, ok = analysis.critical_path_analysis(rank=rank, annotation="ProfilerStep", instance_id=0)
                checks.say(bool(ok), f"rank {rank} HTA's critical path analysis of the first step ran: {cp}")
            else:
                print(f"-- rank {rank}: no critical path analysis: no launch call is named as HTA counts queues")

        if cutoff is None:
            rows = all_rows
        else:
            rows = [r for r in all_rows if r.has_call_event() and r.call < cutoff]
        left = f", {len(all_rows) - len(rows)} left out as HTA leaves them out" if cutoff is not None else ""
        print(f"-- rank {rank}: {len(rows)} timed GPU rows in gmprof's tables{left}")

        # Per step: HTA's iteration of each GPU event against the step range row's GPU time:
        # its kernels' (gpu_time_ns) and, where every memcpy and memset call was stamped (so
        # HTA keeps them), its transfers' (transfer_time_ns).
        df = analysis.t.get_trace(rank)
        gpu = df[df["stream"] >= 0]
        with_transfers = all(r.has_call_event() for r in all_rows if not r.kernel)
        if not with_transfers:
            gpu = gpu[gpu["cat"] == analysis.t.symbol_table.get_sym_id_map().get("kernel", -1)]
            print(f"-- rank {rank}: steps compared by kernel time: memcpy and memset calls without a stamp")
        per_iteration = gpu.groupby("iteration")["dur"].sum().to_dict()
        for number, row in steps:
            if number not in hta_steps:
                continue
            mine = (row.get("gpu_time_ns") or 0) + ((row.get("transfer_time_ns") or 0) if with_transfers else 0)
            checks.close(f"rank {rank} step {number} GPU time", float(per_iteration.get(number, 0.0)), mine / 1000.0)

        mine = defaultdict(int)
        for r in rows:
            mine[r.name] += r.dur
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

        # Launch statistics: the calls HTA joins, from gmprof's rows.
        stats = launch_stats[rank]
        launched = [r for r in rows if r.has_call_event() and kineto_call_name(r.api) in LAUNCH_STAT_CALLS]
        timed = sum(1 for r in launched if r.call_end is not None)
        checks.say(
            len(stats) == len(launched),
            f"rank {rank} launch statistics rows: HTA {len(stats)}, gmprof {len(launched)} (calls with a return "
            f"time: {timed})",
        )
        checks.close(
            f"rank {rank} launch calls' time (cpu_duration)",
            float(stats["cpu_duration"].sum()),
            sum(r.call_dur() for r in launched) / 1000.0,
        )
        checks.close(
            f"rank {rank} launched GPU time (gpu_duration)", float(stats["gpu_duration"].sum()), sum(r.dur for r in launched) / 1000.0
        )
        delay = sum(max(0, r.start - (r.call_end if r.call_end is not None else r.call)) for r in launched)
        checks.close(f"rank {rank} launch delay", float(stats["launch_delay"].sum()), delay / 1000.0)

        spans = [(r.start, r.end) for r in rows]
        compute = union((r.start, r.end) for r in rows if kernel_type(r.name) == "COMPUTATION")
        comm = union((r.start, r.end) for r in rows if kernel_type(r.name) == "COMMUNICATION")
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
        for r in rows:
            per_stream[r.stream].append((r.start, r.end))
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
    parser.add_argument(
        "--expect-steps", action="store_true", help="fail when a rank's trace has fewer than two ProfilerStep#N events"
    )
    args = parser.parse_args()
    try:
        failed = check(os.path.abspath(args.run_dir), args.tolerance, args.expect_comm, args.expect_steps)
    except BadInput as e:
        print(f"hta_check: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"hta_check: HTA is not importable ({e}): pip install holistictraceanalysis 'pandas<3'", file=sys.stderr)
        return 2
    if failed:
        print(f"hta_check: {failed} check(s) disagree", file=sys.stderr)
        return 1
    print("hta_check: HTA's numbers agree with gmprof's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
