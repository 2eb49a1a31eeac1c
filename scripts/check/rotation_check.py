#!/usr/bin/env python3
"""A per_kernel run in rotation against a run that measured every launch.

    rotation_check.py FULL_DIR ROTATION_DIR [--metric dram__bytes_read.sum] [--short-ns 20000] [--min-bytes 1e6]

Both directories hold a report.json with a `rotation` section (run the full one with
`--rotate 1`: every launch measured, each position's values the mean over its steps).
Templates are matched by their step path and kernel sequence; per position, the rotation's
mean is set against the full run's mean: the relative difference's median and p90 of the
metric over the positions reading at least --min-bytes (smaller reads are mostly L2 hits and
vary from launch to launch), those of them shorter than --short-ns, and the rest; of the kernel
time (activity records: the mean over every launch, measured or not); then the range groups'
one-step totals of the metric. Exits 1 when a template of
the rotation has no match in the full run.
"""
import argparse
import json
import sys


def load(path):
    with open(f"{path}/report.json") as f:
        report = json.load(f)
    rot = report.get("rotation")
    if rot is None:
        sys.exit(f"{path}: report.json has no rotation section (run with --rotate N)")
    names = [r["metric"]["name"] for r in report["meta"]["metrics"]]
    return rot, names


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("full")
    ap.add_argument("rotation")
    ap.add_argument("--metric", default="dram__bytes_read.sum")
    ap.add_argument("--short-ns", type=float, default=20000.0)
    ap.add_argument("--min-bytes", type=float, default=1e6)
    a = ap.parse_args()
    full, fnames = load(a.full)
    rot, rnames = load(a.rotation)
    print(f"rotation 1/{rot['run']['every']}: {rot['steps']} steps, {len(rot['templates'])} template(s); "
          f"measured {rot['run']['measured_launches']}, unmeasured {rot['run']['unmeasured_launches']}")
    for t in rot["templates"]:
        print(f"  template {t['template']} {t['step_path']!r}: {t['steps']} steps, {t['positions']} positions, "
              f"{t['measured_positions']} measured, covered after {t['steps_to_cover']} step(s)")

    def seq(report):
        by = {}
        for p in report["positions"]:
            by.setdefault(p["template"], []).append(p)
        return {t: sorted(ps, key=lambda p: p["position"]) for t, ps in by.items()}

    fseq, rseq = seq(full), seq(rot)
    key = lambda t, ps: (t["step_path"], tuple((p["kernel_name"], tuple(p["block"] or [])) for p in ps))
    ftemplates = {key(t, fseq.get(t["template"], [])): t for t in full["templates"]}
    missing = 0
    pairs = []
    for t in rot["templates"]:
        ps = rseq.get(t["template"], [])
        ft = ftemplates.get(key(t, ps))
        if ft is None:
            print(f"  template {t['template']} ({t['steps']} steps): no template of the full run has its kernel sequence")
            missing += 1
            continue
        pairs.extend(zip(ps, fseq[ft["template"]]))
    fi, ri = fnames.index(a.metric), rnames.index(a.metric)
    big, small, shorts, unmeasured = [], [], [], 0
    for p, q in pairs:
        r, f = p["values"][ri], q["values"][fi]
        if r is None:
            unmeasured += 1
            continue
        if not f:
            continue
        d = abs(r - f) / abs(f)
        (big if f >= a.min_bytes else small).append(d)
        if f >= a.min_bytes and (q["duration_ns"] or 0) < a.short_ns:
            shorts.append(d)
    print(f"{a.metric}, positions reading at least {a.min_bytes / 1e6:g} MB: {len(big)}, median {100 * quantile(big, 0.5):.2f} %, "
          f"p90 {100 * quantile(big, 0.9):.2f} %, max {100 * quantile(big, 1.0):.2f} % ({unmeasured} never measured)")
    print(f"  of them shorter than {a.short_ns / 1000:.0f} us: {len(shorts)}, median {100 * quantile(shorts, 0.5):.2f} %, "
          f"p90 {100 * quantile(shorts, 0.9):.2f} %")
    print(f"  positions reading less: {len(small)}, median {100 * quantile(small, 0.5):.2f} %, p90 {100 * quantile(small, 0.9):.2f} %")
    times = [abs(p["duration_ns"] - q["duration_ns"]) / q["duration_ns"] for p, q in pairs if p["duration_ns"] and q["duration_ns"]]
    short_times = [abs(p["duration_ns"] - q["duration_ns"]) / q["duration_ns"] for p, q in pairs
                   if p["duration_ns"] and q["duration_ns"] and q["duration_ns"] < a.short_ns]
    print(f"kernel time (activity, mean of every launch): {len(times)} positions, median {100 * quantile(times, 0.5):.2f} %, "
          f"p90 {100 * quantile(times, 0.9):.2f} %; shorter than {a.short_ns / 1000:.0f} us: {len(short_times)}, "
          f"median {100 * quantile(short_times, 0.5):.2f} %")
    if a.metric in fnames and a.metric in rnames:
        fi, ri = fnames.index(a.metric), rnames.index(a.metric)
        fgroups = {}
        for g in full["groups"]:
            t = next(t for t in full["templates"] if t["template"] == g["template"])
            fgroups[(t["step_path"], g["path"], g["positions"])] = g
        diffs = []
        for g in rot["groups"]:
            t = next(t for t in rot["templates"] if t["template"] == g["template"])
            f = fgroups.get((t["step_path"], g["path"], g["positions"]))
            if f and g["values"][ri] is not None and f["values"][fi]:
                diffs.append((abs(g["values"][ri] - f["values"][fi]) / f["values"][fi], g["path"]))
        diffs.sort()
        print(f"range groups, one step's {a.metric}: {len(diffs)} compared, median "
              f"{100 * quantile([d for d, _ in diffs], 0.5):.2f} %, p90 {100 * quantile([d for d, _ in diffs], 0.9):.2f} %, "
              f"max {100 * diffs[-1][0] if diffs else float('nan'):.2f} % ({diffs[-1][1] if diffs else ''})")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
