#!/usr/bin/env python3
"""Per-kernel DRAM bytes from PM sampling against ncu's, paired in launch order (issue 29).

    pm_vs_ncu.py NCU_CSV PM_CSV [--tail] [--metric dram__bytes_read.sum]

NCU_CSV: `ncu --csv --print-units base --cache-control none --clock-control none --metrics
dram__bytes_read.sum,gpu__time_duration.sum PROGRAM`. PM_CSV: gmprof's pm.csv of the same
program (`--pm-sampling` with dram__bytes_read.sum.per_second). gmprof's kernel rows (scope
kernel, the metric's per-second rate; `total` is the integrated bytes) are taken in start
order and paired with ncu's kernels in launch order: from the start, or with --tail from the
end of ncu's list (when ncu profiled launches gmprof did not). Pairs whose names differ are
counted and left out. Prints, for kernels of at least 200, 50 and 20 us (ncu's time), the
number compared and the median and p90 of |pm / ncu - 1| on kernels reading at least 1 MB,
the share of kernels with a PM value, and PASS/FAIL against issue 29's limits (50 us:
median 5 %, p90 15 %; 20 us: median 10 %), then the same errors by gmprof's per-kernel
confidence (high, medium, low). Exits 1 on a FAIL.
"""
import argparse
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_ncu  # noqa: E402  (the same ncu CSV reader)


def read_ncu(path, metric):
    """ncu's kernels in launch order: (name, metric, gpu__time_duration.sum)."""
    rows = compare_ncu.read_ncu(path, "")
    return [(r["name"], r[metric], r["gpu__time_duration.sum"]) for r in rows
            if metric in r and "gpu__time_duration.sum" in r]


def read_pm(path, metric):
    rate = metric + ".per_second"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(l for l in f if not l.startswith("#")))
    kernels = [r for r in rows if r["scope"] == "kernel" and r["metric"] == rate]
    kernels.sort(key=lambda r: int(r["start_ns"] or 0))
    return [(r["kernel_name"], float(r["total"]) if r["total"] else None, r.get("confidence") or "")
            for r in kernels]


def short(name):
    """A kernel's base name, the same from ncu's demangler and CUPTI's: ncu writes
    `void native::<unnamed>::f<float>(const float *)` where CUPTI writes
    `void at::native::(anonymous namespace)::f<float>(float const*)`; both give `f`."""
    name = name.replace("void ", "").replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    return name.split("(")[0].split("<")[0].strip().split("::")[-1]


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ncu")
    ap.add_argument("pm")
    ap.add_argument("--tail", action="store_true")
    ap.add_argument("--metric", default="dram__bytes_read.sum")
    a = ap.parse_args()
    ncu = read_ncu(a.ncu, a.metric)
    pm = read_pm(a.pm, a.metric)
    all_ncu, all_pm = len(ncu), len(pm)
    n = min(all_ncu, all_pm)
    ncu = ncu[-n:] if a.tail else ncu[:n]
    pm = pm[:n]
    pairs, mismatched, blank = [], 0, 0
    for (nname, nbytes, ntime), (pname, pbytes, conf) in zip(ncu, pm):
        if short(nname) != short(pname):
            mismatched += 1
            continue
        if pbytes is None:
            blank += 1
            continue
        pairs.append((ntime, nbytes, pbytes, conf))
    # ncu may profile fewer kernels than ran (llm.c calls cudaProfilerStop after step 3).
    print("paired %d kernels (ncu profiled %d, gmprof has %d): %d names differ, %d without a PM value"
          % (n, all_ncu, all_pm, mismatched, blank))
    ok = True
    for floor_us, median_limit, p90_limit in ((200, None, None), (50, 0.05, 0.15), (20, 0.10, None)):
        errs = [abs(p / b - 1) for t, b, p, _ in pairs if t >= floor_us * 1e3 and b >= 1e6]
        med, p90 = (statistics.median(errs), pct(errs, 0.9)) if errs else (float("nan"), float("nan"))
        verdict = ""
        if median_limit is not None:
            good = bool(errs) and med <= median_limit and (p90_limit is None or p90 <= p90_limit)
            ok &= good
            verdict = "PASS" if good else "FAIL"
        limits = "" if median_limit is None else " (limits: median %.0f %%%s)" % (
            median_limit * 100, "" if p90_limit is None else ", p90 %.0f %%" % (p90_limit * 100))
        print("%-5s kernels >= %d us reading >= 1 MB: %d compared, median %.2f %%, p90 %.2f %%%s"
              % (verdict, floor_us, len(errs), med * 100, p90 * 100, limits))
    # The same errors by gmprof's per-kernel confidence (pm.csv's `confidence` column).
    for floor_us in (50, 20):
        for conf in ("high", "medium", "low"):
            errs = [abs(p / b - 1) for t, b, p, c in pairs if t >= floor_us * 1e3 and b >= 1e6 and c == conf]
            if errs:
                print("      kernels >= %d us, confidence %-6s: %d compared, median %.2f %%, p90 %.2f %%"
                      % (floor_us, conf, len(errs), statistics.median(errs) * 100, pct(errs, 0.9) * 100))
    total_ncu = sum(b for _, b, _, _ in pairs)
    total_pm = sum(p for _, _, p, _ in pairs)
    if total_ncu:
        print("      total over the paired kernels: gmprof %.4g B, ncu %.4g B (%+.2f %%)"
              % (total_pm, total_ncu, (total_pm / total_ncu - 1) * 100))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
