#!/usr/bin/env python3
"""Cross-checks gmprof runs of one real program in several modes.

    check_modes.py RANGE_GLOB OUT [OUT ...] [--skip K] [--skip-last L]

For each OUT (a `gmprof run -o OUT` directory): the summary's loss counters and every
warning of report.json, and the kernel count of each range whose name matches RANGE_GLOB
(e.g. "Train step *" or "step"; ranges.csv), in the order they started. Instance i must hold
the same number of kernels in every run that has it, after the first K instances (warm-up)
and before each run's last L (the end of the run: llm.c's last step only validates, and the
last range of `--torch-steps` runs to the program's exit). A run whose instances disagree, a
flagged kernel row, a dropped record or a warning is printed as FAIL. Exits 1 if any check
fails.
"""
import argparse
import csv
import fnmatch
import json
import os
import sys


def instances(out, name):
    with open(os.path.join(out, "ranges.csv")) as f:
        rows = list(csv.DictReader(l for l in f if not l.startswith("#")))
    got = [r for r in rows if fnmatch.fnmatchcase(r["name"], name)]
    got.sort(key=lambda r: int(r.get("start_ns") or 0))
    return [int(r["kernel_count"]) for r in got]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name")
    ap.add_argument("outs", nargs="+")
    ap.add_argument("--skip", type=int, default=1)
    ap.add_argument("--skip-last", type=int, default=1)
    a = ap.parse_args()
    failed = False
    counts = {}
    for out in a.outs:
        try:
            with open(os.path.join(out, "report.json")) as f:
                meta = json.load(f)["meta"]
            counts[out] = instances(out, a.name)
        except (OSError, ValueError, KeyError) as e:
            print("FAIL %s: %s" % (out, e))
            failed = True
            continue
        losses = {k: meta.get(k, 0) for k in ("dropped_counter_ranges", "dropped_activity_records",
                                                "flagged_kernel_rows", "orphan_counter_ranges")}
        warnings = meta.get("warnings", [])
        bad = any(losses.values()) or warnings
        print("%s %s: mode %s, %d kernels, %s, %d warning(s)" % (
            "FAIL" if bad else "ok", out, meta.get("mode"), meta.get("kernel_count", 0),
            " ".join("%s=%s" % kv for kv in losses.items()), len(warnings)))
        for w in warnings:
            print("    warning: %s" % w)
        print("    %s instances: %s" % (a.name, counts[out][:12]))
        failed |= bool(bad)
    longest = max((len(c) for c in counts.values()), default=0)
    for i in range(a.skip, longest):
        seen = {out: c[i] for out, c in counts.items() if i < len(c) - a.skip_last}
        if len(set(seen.values())) > 1:
            print("FAIL %s instance %d: kernel counts differ: %s" % (a.name, i, seen))
            failed = True
    if not failed:
        print("ok: %s instances from %d, each run's last %d left out, hold the same kernels in every run"
              % (a.name, a.skip, a.skip_last))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
