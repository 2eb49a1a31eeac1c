#!/usr/bin/env python3
"""Check that an injected run heard NVTX from the program's first NVTX call.

    check_nvtx_early.py OUT [--counts JSON] [--started-by WORDS] [--unbalanced N]
                            [--warning-contains TEXT] [--allow-warnings]

* injection.json: started_by must be WORDS (default "first NVTX call"; "any" accepts
  either) and nvtx_unbalanced_pops must be N (default 0).
* report.json: with N = 0 and no --allow-warnings, meta.warnings must be empty; with
  --warning-contains, one warning must contain TEXT.
* ranges.csv: for each {"path": kernels} of --counts (a JSON object), the path's instances
  must hold that many kernels together, and there must be at least one instance (a path
  with 0 kernels must be absent).

Prints one line per check and exits 1 if any fails.
"""
import argparse
import csv
import json
import os
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--counts", default="{}", help='JSON object {"range path": kernels}')
    p.add_argument("--started-by", default="first NVTX call")
    p.add_argument("--unbalanced", type=int, default=0)
    p.add_argument("--warning-contains")
    p.add_argument("--allow-warnings", action="store_true")
    a = p.parse_args()
    ok = True

    def check(good, text):
        nonlocal ok
        ok &= bool(good)
        print("%-5s %s" % ("ok" if good else "FAIL", text))

    with open(os.path.join(a.out, "injection.json")) as f:
        status = json.load(f)
    with open(os.path.join(a.out, "report.json")) as f:
        warnings = json.load(f)["meta"]["warnings"]
    check(a.started_by == "any" or status.get("started_by") == a.started_by,
          "started_by %r, expected %r" % (status.get("started_by"), a.started_by))
    check(status.get("nvtx_unbalanced_pops") == a.unbalanced,
          "nvtx_unbalanced_pops %s, expected %d" % (status.get("nvtx_unbalanced_pops"), a.unbalanced))
    print("info  nvtx_pushes %s, nvtx_ranges_followed %s"
          % (status.get("nvtx_pushes"), status.get("nvtx_ranges_followed")))
    if a.unbalanced == 0 and not a.allow_warnings:
        check(warnings == [], "warnings: %d %s" % (len(warnings), warnings))
    if a.warning_contains:
        check(any(a.warning_contains in w for w in warnings),
              "a warning contains %r: %s" % (a.warning_contains, warnings))
    with open(os.path.join(a.out, "ranges.csv")) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    by_path = {}
    for r in rows:
        by_path.setdefault(r["path"], []).append(int(r["kernel_count"]))
    print("info  ranges: %s" % json.dumps(by_path))
    for path, want in sorted(json.loads(a.counts).items()):
        got = by_path.get(path)
        if want == 0:
            check(got is None, "range %r absent (got %s)" % (path, got))
        else:
            check(got is not None and sum(got) == want,
                  "range %r: %s instance(s), %s kernels, expected %d" % (path, len(got or []), sum(got or []), want))
    print("ALL OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
