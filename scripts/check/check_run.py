#!/usr/bin/env python3
"""Check gmprof's outputs against independent numbers.

    check_run.py OUT [--counts COUNTS.json] [--expect-dram PATH:READ_MIB:WRITE_MIB ...]
                     [--tolerance 0.02] [--expect-end KIND] [--per-instance PATH:KERNELS ...]

* Kernel counts: for every range path in COUNTS.json ({"step/forward": 123, ...}, e.g.
  written by torch_train.py --count-kernels from torch.profiler, or known from the
  program), the kernels gmprof attributed to that path (ranges.csv kernel_count, summed
  over instances) must be equal.
* DRAM bytes: every instance of range PATH must read READ_MIB and write WRITE_MIB of DRAM
  (dram__bytes_read.sum / dram__bytes_write.sum) within the tolerance: the analytic
  traffic of a known operation, such as a large copy.

* How the run ended: report.json's run_end.kind must be KIND (finished, signal, checkpoint).
* Per instance: every closed instance of range PATH must hold exactly KERNELS kernels, and
  there must be at least one; an instance cut by the end of the run (gmprof's warning says it
  was closed at the end) may hold fewer. For runs ended in the middle by a signal.
* Every output file must parse, and no kernel row may be flagged.

Prints one line per check and exits 1 if any fails.
"""
import argparse
import csv
import json
import os
import sys


def read_ranges(out):
    with open(os.path.join(out, "ranges.csv")) as f:
        lines = [line for line in f if not line.startswith("#")]
    return list(csv.DictReader(lines))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--counts", help="JSON of expected kernel counts per range path")
    p.add_argument("--expect-dram", action="append", default=[], metavar="PATH:READ_MIB:WRITE_MIB")
    p.add_argument("--tolerance", type=float, default=0.02)
    p.add_argument("--expect-end", help="report.json run_end.kind: finished, signal or checkpoint")
    p.add_argument("--per-instance", action="append", default=[], metavar="PATH:KERNELS")
    p.add_argument("--warmup", type=int, default=0,
                   help="--per-instance: the first K instances (warm-up steps) are listed, not checked")
    p.add_argument("--first-sum", action="append", default=[], metavar="PATH:N:KERNELS",
                   help="the first N instances of PATH hold KERNELS kernels together (e.g. torch.profiler's N steps)")
    a = p.parse_args()
    rows = read_ranges(a.out)
    with open(os.path.join(a.out, "report.json")) as f:
        report = json.load(f)
    for name in ("kernels.csv", "transfers.csv", "stats.csv", "trace.json"):
        if not os.path.exists(os.path.join(a.out, name)):
            print("FAIL  %s is missing" % name)
            return 1
    meta = report["meta"]
    end = meta.get("run_end") or {}
    print("info  run_end %s | %d kernels | %d flagged | warnings: %s"
          % (json.dumps(end), meta["kernel_count"], meta["flagged_kernel_rows"], meta["warnings"][:3]))
    expected = {}
    if a.counts:
        with open(a.counts) as f:
            expected = json.load(f)
    ok = meta["flagged_kernel_rows"] == 0
    if not ok:
        with open(os.path.join(a.out, "kernels.csv")) as f:
            krows = list(csv.DictReader(line for line in f if not line.startswith("#")))
        statuses = {}
        for r in krows:
            if r["status"] != "ok":
                statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        print("FAIL  %d flagged kernel rows: %s" % (meta["flagged_kernel_rows"], statuses))
    if a.expect_end:
        good = end.get("kind") == a.expect_end
        ok &= good
        print("%-5s run_end %s, expected %s" % ("ok" if good else "FAIL", end.get("kind"), a.expect_end))
    by_path = {}
    for r in rows:
        by_path.setdefault(r["path"], []).append(r)
    for path, want in sorted(expected.items()):
        got = sum(int(r["kernel_count"]) for r in by_path.get(path, []))
        good = got == want
        ok &= good
        print("%-5s kernels %-22s gmprof %6d  expected %6d" % ("ok" if good else "FAIL", path, got, want))
    for spec in a.expect_dram:
        path, read_mib, write_mib = spec.rsplit(":", 2)
        instances = by_path.get(path, [])
        if not instances or "dram__bytes_read.sum" not in instances[0]:
            print("FAIL  no %s rows with DRAM columns in ranges.csv" % path)
            ok = False
            continue
        for r in instances:
            for col, mib in (("dram__bytes_read.sum", read_mib), ("dram__bytes_write.sum", write_mib)):
                analytic = float(mib) * (1 << 20)
                got = float(r[col] or "nan")
                good = abs(got - analytic) <= a.tolerance * analytic
                ok &= good
                print("%-5s %s %s #%s: %.2f MB, analytic %.2f MB (%+.2f%%)"
                      % ("ok" if good else "FAIL", col, path, r["instance"], got / 1e6, analytic / 1e6,
                         100 * (got - analytic) / analytic))
    cut = " ".join(meta["warnings"])
    for spec in a.per_instance:
        path, want = spec.rsplit(":", 1)
        instances = by_path.get(path, [])
        good = len(instances) > 0
        for i, r in enumerate(instances):
            if i < a.warmup:
                continue
            got = int(r["kernel_count"])
            last_cut = i == len(instances) - 1 and ("still open" in cut or "left open" in cut or "open at" in cut)
            good &= got == int(want) or (last_cut and got <= int(want))
        ok &= good
        print("%-5s %d instance(s) of %s, kernels %s (each %s)"
              % ("ok" if good else "FAIL", len(instances), path, [int(r["kernel_count"]) for r in instances], want))
    for spec in a.first_sum:
        path, n, want = spec.rsplit(":", 2)
        got = sum(int(r["kernel_count"]) for r in by_path.get(path, [])[: int(n)])
        good = got == int(want)
        ok &= good
        print("%-5s first %s instance(s) of %s hold %d kernels, expected %s" % ("ok" if good else "FAIL", n, path, got, want))
    print("ALL OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
