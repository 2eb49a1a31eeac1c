#!/usr/bin/env python3
"""A per_kernel run in rotation against ncu on the same launches of one step.

    rotation_vs_ncu.py NCU_CSV ROTATION_DIR [--short-ns 20000] [--min-bytes 1e6]

NCU_CSV: `ncu --csv --print-units base --cache-control none --clock-control none --launch-skip
S --launch-count P --metrics gpu__time_duration.sum,dram__bytes_read.sum PROGRAM`, S the launches
before one step of the rotation's main template (the one with the most steps) and P its launches
(scripts/gpu/rotation-validate.sh finds them in the rotation's kernels.csv and report.json). Launch i of ncu's list is position i of
that template (kernel names are checked). Per position: the rotation's mean DRAM bytes read
over its measurements against ncu's; the kernel time as the rotation's activity records give
it (every launch, mean) and as its counter range gives it (gpu__time_duration.sum, measured
launches) against ncu's gpu__time_duration.sum: median and p90 of the relative difference,
over all positions and over those shorter than --short-ns.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_ncu import read_ncu  # noqa: E402  (ncu's CSV, one dict per launch in order)


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def short(name):
    """The kernel's own name: no return type, template arguments, parameters or namespaces
    (ncu prints `at::vectorized_gather_kernel` where CUPTI's demangled name has
    `at::native::vectorized_gather_kernel`)."""
    name = name.replace("void ", "")
    return name.split("(")[0].split("<")[0].strip().split("::")[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ncu")
    ap.add_argument("rotation")
    ap.add_argument("--short-ns", type=float, default=20000.0)
    ap.add_argument("--min-bytes", type=float, default=1e6)
    a = ap.parse_args()
    ncu = read_ncu(a.ncu, "")
    report = json.load(open(f"{a.rotation}/report.json"))
    rot = report["rotation"]
    names = [r["metric"]["name"] for r in report["meta"]["metrics"]]
    read_i, time_i = names.index("dram__bytes_read.sum"), names.index("gpu__time_duration.sum")
    main_t = max(rot["templates"], key=lambda t: (t["steps"], -t["template"]))
    positions = sorted((p for p in rot["positions"] if p["template"] == main_t["template"]), key=lambda p: p["position"])
    print(f"template {main_t['template']} ({main_t['step_path']}): {len(positions)} positions, {main_t['steps']} steps; "
          f"ncu: {len(ncu)} launches")
    if len(ncu) != len(positions):
        print(f"FAIL ncu profiled {len(ncu)} launches, the template has {len(positions)}")
    named = sum(short(p["kernel_name"]) == short(n["name"]) for p, n in zip(positions, ncu))
    print(f"kernel names agree at {named} of {min(len(ncu), len(positions))} positions")
    out = {"bytes": [], "bytes_short": [], "activity": [], "activity_short": [], "range": [], "range_short": []}
    unmeasured = 0
    for p, n in zip(positions, ncu):
        if short(p["kernel_name"]) != short(n["name"]):
            continue
        ns = n.get("gpu__time_duration.sum")
        is_short = (ns or 0) < a.short_ns
        b, nb = p["values"][read_i], n.get("dram__bytes_read.sum")
        if b is None:
            unmeasured += 1
        elif nb is not None and nb >= a.min_bytes and nb > 0:
            d = abs(b - nb) / nb
            out["bytes"].append(d)
            if is_short:
                out["bytes_short"].append(d)
        if ns:
            if p["duration_ns"] is not None:
                d = abs(p["duration_ns"] - ns) / ns
                out["activity"].append(d)
                if is_short:
                    out["activity_short"].append(d)
            t = p["values"][time_i]
            if t is not None:
                d = abs(t - ns) / ns
                out["range"].append(d)
                if is_short:
                    out["range_short"].append(d)
    print(f"positions never measured in the rotation: {unmeasured}")
    label = {
        "bytes": f"DRAM bytes read, positions reading at least {a.min_bytes / 1e6:g} MB (rotation's mean of measurements vs ncu)",
        "activity": "kernel time, activity records (mean of every launch) vs ncu gpu__time_duration",
        "range": "kernel time, counter range gpu__time_duration (measured launches) vs ncu",
    }
    for k in ("bytes", "activity", "range"):
        v, s = out[k], out[k + "_short"]
        print(f"{label[k]}: {len(v)} positions, median {100 * quantile(v, 0.5):.2f} %, p90 {100 * quantile(v, 0.9):.2f} %; "
              f"shorter than {a.short_ns / 1000:.0f} us: {len(s)}, median {100 * quantile(s, 0.5):.2f} %, "
              f"p90 {100 * quantile(s, 0.9):.2f} %")


if __name__ == "__main__":
    main()
