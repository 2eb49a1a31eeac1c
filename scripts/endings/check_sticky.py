"""Checks the outputs of scripts/endings/sticky_error.cu run under `gmprof run`.

    check_sticky.py OUT LOG --code 700 [--counters]

* Every output is there, report.json's and injection.json's run_end is
  finished_with_errors with the CUDA error CODE and a failed synchronize, and injection.json
  has no error.
* Steps 0-2 completed: 4 kernels each, all with status ok (with --counters, each step has
  DRAM bytes: the counter cycles decoded before the error keep their values).
* The failing kernel's launch is a not_completed row with no times, or its kernel completed
  (a row of its own); every not_completed row has blank times; the launches that never
  completed are counted and named in a warning.
* LOG (gmprof run's stdout and stderr): no "could not finish profiling", and the ending line
  ("run ended with errors") exactly once.

Prints one line per check and exits 1 if any fails.
"""
import argparse
import csv
import json
import os
import sys


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("log")
    p.add_argument("--code", type=int, required=True)
    p.add_argument("--counters", action="store_true")
    a = p.parse_args()
    ok = True

    def check(good, text):
        nonlocal ok
        ok &= bool(good)
        print("%-5s %s" % ("ok" if good else "FAIL", text))

    for name in ("report.json", "kernels.csv", "ranges.csv", "transfers.csv", "stats.csv", "trace.json"):
        check(os.path.exists(os.path.join(a.out, name)), "%s written" % name)
    if not os.path.exists(os.path.join(a.out, "report.json")):
        return 1
    meta = json.load(open(os.path.join(a.out, "report.json")))["meta"]
    end = meta.get("run_end") or {}
    print("info  run_end %s" % json.dumps(end))
    print("info  counts %s | dropped counter ranges %s" % (json.dumps(meta["counts"]), meta["dropped_counter_ranges"]))
    for w in meta["warnings"]:
        print("info  warning: %s" % w)
    check(end.get("kind") == "finished_with_errors", "run_end finished_with_errors")
    check((end.get("cuda_error") or {}).get("code") == a.code, "cuda_error code %d" % a.code)
    steps = [s.get("step") for s in end.get("failed_steps", [])]
    check("synchronize" in steps, "failed steps %s include synchronize" % steps)
    status = json.load(open(os.path.join(a.out, "injection.json")))
    check((status.get("run_end") or {}).get("kind") == "finished_with_errors", "injection.json run_end")
    check(status.get("error") is None and status.get("outputs_written"), "injection.json: no error, outputs written")

    ranges = [r for r in rows(os.path.join(a.out, "ranges.csv")) if r["path"] == "step"]
    check(len(ranges) == 4, "4 instances of step (got %d)" % len(ranges))
    for r in ranges[:3]:
        check(int(r["kernel_count"]) == 4 and int(r["flagged_kernel_count"]) == 0,
              "step #%s: %s kernels, %s flagged" % (r["instance"], r["kernel_count"], r["flagged_kernel_count"]))
        if a.counters:
            check(r.get("dram__bytes_read.sum", "") != "", "step #%s has DRAM bytes (%s)"
                  % (r["instance"], r.get("dram__bytes_read.sum")))
    kernels = rows(os.path.join(a.out, "kernels.csv"))
    not_completed = [k for k in kernels if k["status"] == "not_completed"]
    faulted = [k for k in kernels if "fault_" in k["kernel_name"]]
    print("info  not_completed rows: %s" % [(k["correlation_id"], k["kernel_name"]) for k in not_completed])
    print("info  failing kernel rows: %s" % [(k["kernel_name"], k["status"], k["duration_ns"]) for k in faulted])
    check(faulted, "the failing kernel has a row")
    check(all(k["start_ns"] == k["end_ns"] == k["duration_ns"] == "" for k in not_completed),
          "not_completed rows have blank times")
    check(int(meta["counts"].get("not_completed", 0)) == len(not_completed), "counts.not_completed")
    if not_completed:
        check(any("never completed" in w for w in meta["warnings"]), "a warning names the launches that never completed")

    log = open(a.log, errors="replace").read()
    check("could not finish profiling" not in log, "no 'could not finish profiling' in the log")
    check(log.count("run ended with errors") == 1,
          "the ending line printed once (%d times)" % log.count("run ended with errors"))
    print("ALL OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
