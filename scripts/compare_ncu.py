#!/usr/bin/env python3
"""Compares gmprof's per-kernel metrics with ncu's on the same kernels.

    compare_ncu.py NCU_CSV GMPROF_KERNELS_CSV [--kernel SUBSTRING] [--skip-ncu N] [--bytes-tol 0.02] [--time-tol 0.10]

NCU_CSV comes from `ncu --csv --print-units base --metrics gpu__time_duration.sum,dram__bytes_read.sum PROGRAM`;
GMPROF_KERNELS_CSV is gmprof's kernels.csv for the same program. Kernels are paired in launch
order after filtering by name. Exits 1 when any pair is outside the tolerances.
"""
import argparse
import csv
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
            rows[key] = {}
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
    a = ap.parse_args()
    ncu = read_ncu(a.ncu_csv, a.kernel)[a.skip_ncu:]
    gm = read_gmprof(a.gmprof_csv, a.kernel)
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


if __name__ == "__main__":
    sys.exit(main())
