#!/usr/bin/env python3
"""Checks on-demand captures (``DIR/capture-K/<process>/``, see README "On-demand capture").

    check_capture.py CAPDIR [CAPDIR ...] [--steps N] [--step NAME]

For every process directory of each CAPDIR (those holding capture.json):

* capture.json: the capture was written (outcome ``written``), and with --steps it holds
  exactly N whole steps, starting at a step (``first_step``);
* ranges.csv: exactly N instances of the step range NAME (default ``step``; at any depth, so
  steps inside an NVTX capture range count), each holding kernels;
* report.json: no flagged kernel row, no dropped counter range or activity record, and the
  run end the capture wrote (``capture end: ...``, or the end of the run it was cut by).

With several processes in one CAPDIR, they must share their first step (a capture of all
ranks starts at the same step). Prints one line per check, concise enough for a validation
log, and exits 1 if any fails.
"""
import argparse
import csv
import json
import os
import sys


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def check_process(d, want_steps, step):
    """Returns (ok, first_step, line)."""
    with open(os.path.join(d, "capture.json")) as f:
        record = json.load(f)
    name = os.path.relpath(d, os.path.dirname(os.path.dirname(d)))
    problems = []
    if record.get("outcome") != "written":
        problems.append("outcome %s: %s" % (record.get("outcome"), record.get("error") or record.get("reason")))
        return False, None, "FAIL  %s: %s" % (name, "; ".join(problems))
    first = record.get("first_step")
    if want_steps is not None:
        if record.get("steps") != want_steps:
            problems.append("capture.json says %s steps, not %d" % (record.get("steps"), want_steps))
        if first is None:
            problems.append("it did not start at a step")
    with open(os.path.join(d, "report.json")) as f:
        meta = json.load(f)["meta"]
    instances = [r for r in rows(os.path.join(d, "ranges.csv")) if r["name"] == step]
    kernels = [int(r["kernel_count"]) for r in sorted(instances, key=lambda r: int(r.get("start_ns") or 0))]
    if want_steps is not None and len(instances) != want_steps:
        problems.append("%d instance(s) of range '%s' in ranges.csv, not %d" % (len(instances), step, want_steps))
    if any(k == 0 for k in kernels):
        problems.append("a step range holds no kernel: %s" % kernels)
    flagged = meta.get("flagged_kernel_rows", 0)
    if flagged:
        problems.append("%d flagged kernel rows" % flagged)
    for key in ("dropped_counter_ranges", "dropped_activity_records"):
        if meta.get(key):
            problems.append("%s %s" % (key, meta[key]))
    end = meta.get("run_end") or {}
    steps = "steps %s-%s" % (first, first + record["steps"] - 1) if first is not None and record.get("steps") else "no step"
    line = "%-5s %s: %s, %s (%s), %d step range(s), %d kernels, kernels per step %s, %d flagged, ended by %s" % (
        "FAIL" if problems else "PASS",
        name,
        record["settings"].get("mode"),
        steps,
        record.get("trigger"),
        len(instances),
        meta.get("kernel_count", 0),
        kernels[:8] + (["..."] if len(kernels) > 8 else []),
        flagged,
        record.get("ended_by") or end.get("by") or end.get("kind"),
    )
    if problems:
        line += ": " + "; ".join(problems)
    return not problems, first, line


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capdirs", nargs="+")
    ap.add_argument("--steps", type=int)
    ap.add_argument("--step", default="step")
    a = ap.parse_args()
    ok = True
    for capdir in a.capdirs:
        procs = sorted(os.path.join(capdir, p) for p in os.listdir(capdir)
                       if os.path.isfile(os.path.join(capdir, p, "capture.json")))
        if not procs:
            print("FAIL  %s: no process directory with capture.json" % capdir)
            ok = False
            continue
        firsts = []
        for d in procs:
            good, first, line = check_process(d, a.steps, a.step)
            ok &= good
            firsts.append(first)
            print(line)
        if len(procs) > 1:
            same = len(set(firsts)) == 1 and firsts[0] is not None
            ok &= same
            print("%-5s %s: %d processes, first steps %s" % ("PASS" if same else "FAIL", os.path.basename(capdir.rstrip("/")),
                                                           len(procs), firsts))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
