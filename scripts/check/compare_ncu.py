#!/usr/bin/env python3
"""Compares gmprof's per-kernel metrics with ncu's on the same kernels.

    compare_ncu.py NCU_CSV GMPROF_KERNELS_CSV [--kernel SUBSTRING] [--skip-ncu N] [--bytes-tol 0.02] [--time-tol 0.10]
    compare_ncu.py NCU_CSV GMPROF_KERNELS_CSV --stats [--tail | --head] [--time-median-tol 0.03] [--time-p90-tol 0.08]

NCU_CSV comes from `ncu --csv --print-units base --metrics gpu__time_duration.sum,dram__bytes_read.sum PROGRAM`;
GMPROF_KERNELS_CSV is gmprof's kernels.csv for the same program. Kernels are paired in launch
order after filtering by name. Exits 1 when any pair is outside the tolerances.

With --stats the check is statistical, for mixed workloads: the median and 90th percentile of
|gmprof / ncu - 1| of kernel time (gmprof's duration_ns against ncu's gpu__time_duration.sum)
must be within --time-median-tol and --time-p90-tol; DRAM bytes read are summarized over the
kernels that read at least 1 MB (smaller reads are mostly L2 hits and vary). --tail pairs
gmprof's kernels with the last ones of ncu's list (ncu also profiles launches made before
gmprof started), and counts pairs whose kernel names differ. --head pairs ncu's kernels with
gmprof's first ones (ncu ran with --launch-count N on the same program from its start).
"""
import argparse
import csv
import math
import sys


def read_ncu(path, name_filter):
    rows = {}
    order = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own log lines first
    for r in csv.DictReader(lines):
        if name_filter not in r["Kernel Name"]:
            continue
        key = r["ID"]
        if key not in rows:
            rows[key] = {"name": r["Kernel Name"]}
            order.append(key)
        rows[key][r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    return [rows[k] for k in order]


def read_gmprof(path, name_filter):
    with open(path, newline="") as f:
        lines = [l for l in f if not l.startswith("#")]
    out = []
    for r in csv.DictReader(lines):
        if name_filter in (r.get("kernel_name") or ""):
            out.append(r)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ncu_csv")
    ap.add_argument("gmprof_csv")
    ap.add_argument("--kernel", default="")
    ap.add_argument("--skip-ncu", type=int, default=0,
                    help="ignore the first N ncu kernels (warm-up launches made before gmprof starts)")
    ap.add_argument("--bytes-tol", type=float, default=0.02)
    ap.add_argument("--time-tol", type=float, default=0.10)
    ap.add_argument("--stats", action="store_true")
    ap.add_argument("--tail", action="store_true")
    ap.add_argument("--head", action="store_true",
                    help="pair ncu's kernels with gmprof's first ones (ncu ran with --launch-count N "
                         "on the same program from its start)")
    ap.add_argument("--time-median-tol", type=float, default=0.03)
    ap.add_argument("--time-p90-tol", type=float, default=0.08)
    ap.add_argument("--min-ns", type=float, default=0.0,
                    help="--stats: check the targets on kernels whose ncu time is at least this")
    a = ap.parse_args()
    ncu = read_ncu(a.ncu_csv, a.kernel)[a.skip_ncu:]
    gm = read_gmprof(a.gmprof_csv, a.kernel)
    if a.tail and len(ncu) >= len(gm):
        ncu = ncu[len(ncu) - len(gm):]
    if a.head and len(gm) >= len(ncu):
        gm = gm[:len(ncu)]
    if a.stats:
        return stats(ncu, gm, a)
    if not ncu or len(ncu) != len(gm):
        print(f"kernel counts differ: ncu {len(ncu)}, gmprof {len(gm)}")
        return 1
    worst_b = worst_t = 0.0
    print(f"{'#':>3} {'ncu read B':>14} {'gmprof read B':>14} {'diff':>7} {'ncu ns':>10} {'gmprof ns':>10} {'diff':>7}")
    for i, (n, g) in enumerate(zip(ncu, gm)):
        nb, gb = n["dram__bytes_read.sum"], float(g["dram__bytes_read.sum"])
        nt, gt = n["gpu__time_duration.sum"], float(g["duration_ns"])
        db, dt = abs(gb - nb) / nb, abs(gt - nt) / nt
        worst_b, worst_t = max(worst_b, db), max(worst_t, dt)
        print(f"{i:>3} {nb:>14.0f} {gb:>14.0f} {db:>6.2%} {nt:>10.0f} {gt:>10.0f} {dt:>6.2%}")
    ok = worst_b <= a.bytes_tol and worst_t <= a.time_tol
    print(f"kernels={len(ncu)} worst_bytes_diff={worst_b:.3%} (allowed {a.bytes_tol:.0%}) "
          f"worst_time_diff={worst_t:.3%} (allowed {a.time_tol:.0%}) -> {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def quantile(values, p):
    """Nearest-rank quantile."""
    v = sorted(values)
    return v[min(len(v), max(1, math.ceil(p * len(v)))) - 1] if v else float("nan")


def short(name):
    """A kernel name without parameters or template arguments, for pairing checks."""
    return name.split("(")[0].split("<")[0].strip().split(" ")[-1]


def stats(ncu, gm, a):
    if not ncu or len(ncu) != len(gm):
        print(f"kernel counts differ: ncu {len(ncu)}, gmprof {len(gm)}")
        return 1
    time_diffs, byte_diffs, signed, names_differ = [], [], [], 0
    for n, g in zip(ncu, gm):
        if short(n["name"]) != short(g.get("kernel_name") or ""):
            names_differ += 1
        nt, gt = n["gpu__time_duration.sum"], float(g["duration_ns"])
        time_diffs.append(abs(gt / nt - 1))
        signed.append(gt / nt - 1)
        nb = n.get("dram__bytes_read.sum", 0.0)
        if nb >= 1e6 and g.get("dram__bytes_read.sum"):
            byte_diffs.append(abs(float(g["dram__bytes_read.sum"]) / nb - 1))
    checked = [d for n, d in zip(ncu, time_diffs) if n["gpu__time_duration.sum"] >= a.min_ns]
    med, p90 = quantile(checked, 0.5), quantile(checked, 0.9)
    by_size = {}
    for n, d in zip(ncu, signed):
        t = n["gpu__time_duration.sum"]
        band = "<10us" if t < 1e4 else "10-100us" if t < 1e5 else ">=100us"
        by_size.setdefault(band, []).append(d)
    print(f"kernels={len(gm)} names_differ={names_differ}")
    for band in ("<10us", "10-100us", ">=100us"):
        d = by_size.get(band, [])
        if d:
            print(f"  {band:>9}: {len(d):4} kernels, gmprof/ncu - 1 median {quantile(d, 0.5):+.2%}, "
                  f"|diff| median {quantile([abs(x) for x in d], 0.5):.2%} p90 {quantile([abs(x) for x in d], 0.9):.2%}")
    if byte_diffs:
        print(f"dram_read (kernels reading >= 1 MB): {len(byte_diffs)} kernels, |diff| median "
              f"{quantile(byte_diffs, 0.5):.2%} p90 {quantile(byte_diffs, 0.9):.2%}")
    ok = med <= a.time_median_tol and p90 <= a.time_p90_tol
    scope = f"kernels of >= {a.min_ns:.0f} ns ({len(checked)})" if a.min_ns else f"all {len(checked)} kernels"
    print(f"time, {scope}: |diff| median={med:.2%} (target {a.time_median_tol:.0%}) p90={p90:.2%} "
          f"(target {a.time_p90_tol:.0%}) signed median={quantile(signed, 0.5):+.2%} -> {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
