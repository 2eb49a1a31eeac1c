"""Consistency of a long streamed run (issue 42), for scripts/gpu/long-run.sh.

    python3 scripts/check/long_run_check.py RUN_DIR [PROGRAM_STDOUT]

Reads the streamed part files with pyarrow and checks, printing PASS or FAIL per line:
- the kernels in kernels/ = report.json's streamed.kernels (when the run wrote its report);
- the whole run's kernel aggregates (count and total duration per kernel name) = a
  recomputation from kernels/; the quantiles within DDSketch's 1 % of the rows' own;
- steps/ has one row per step, numbered 0..n-1 without a gap; with PROGRAM_STDOUT (llm.c's
  "step N/M" lines) the steps counted equal the steps the program printed.
It also prints the bytes per kernel of the run's directory. Exit 1 on any FAIL.
"""
import json
import os
import re
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

run = sys.argv[1]
stdout = sys.argv[2] if len(sys.argv) > 2 else None
failed = False


def check(ok, what):
    global failed
    failed |= not ok
    print(("PASS " if ok else "FAIL ") + what)


def table(name, columns):
    path = os.path.join(run, name)
    if not os.path.isdir(path):
        return None
    return ds.dataset(path, format="parquet").to_table(columns=columns)


report = None
if os.path.exists(os.path.join(run, "report.json")):
    with open(os.path.join(run, "report.json")) as f:
        report = json.load(f)
streamed = (report or {}).get("streamed")
if report is None:
    print("no report.json (the run was killed): the parts alone are checked")
elif streamed is None:
    print("report.json has no streamed section: the run was written whole")
    sys.exit(1)
else:
    meta = report["meta"]
    print(f"report: mode {meta.get('mode')}, {streamed['kernels']} kernels, {streamed['steps']} steps, "
          f"step group {streamed.get('step_group')!r}, {len(meta.get('warnings', []))} warning(s)")
    for w in meta.get("warnings", [])[:10]:
        print("  warning:", w)
    for t in streamed["tables"]:
        print(f"  {t['table']}: {t['parts']} parts, {t['rows']} rows")
    if streamed.get("drain_times"):
        d = streamed["drain_times"]
        n = max(d["drains"], 1)
        print(f"  drains: {d['drains']}, mean {d['total_ns'] / n / 1e6:.1f} ms (max {d['total_max_ns'] / 1e6:.1f}), "
              f"session lock mean {d['session_lock_ns'] / n / 1e6:.2f} ms (max {d['session_lock_max_ns'] / 1e6:.2f}), "
              f"its other holds mean {d.get('other_lock_ns', 0) / n / 1e6:.2f} ms (max {d.get('other_lock_max_ns', 0) / 1e6:.2f})")

k = table("kernels", ["kernel_name", "duration_ns"])
nk = k.num_rows if k is not None else 0
print(f"kernels/ parts: {nk} rows")
if streamed:
    check(nk == streamed["kernels"], f"kernels in the parts ({nk}) = kernels streamed ({streamed['kernels']})")
    agg = {a["key"]: a for a in streamed["aggregates"] if a["table"] == "kernel" and a["quantity"] == "duration_ns"}
    # count: rows with a value; missing: rows without one (a record CUPTI gave no times).
    # (Two counts of one column share a result name in pyarrow: the rows are counted on the
    # name column, the values on the duration column.)
    g = k.group_by("kernel_name").aggregate(
        [("duration_ns", "count"), ("duration_ns", "sum"), ("kernel_name", "count")]
    ).to_pylist()
    mism = []
    missing = 0
    for row in g:
        a = agg.get(row["kernel_name"])
        rows_all = row["kernel_name_count"]
        missing += rows_all - row["duration_ns_count"]
        if (a is None or a["count"] != row["duration_ns_count"] or a.get("missing", 0) != rows_all - row["duration_ns_count"]
                or a.get("total_ns") != row["duration_ns_sum"]):
            mism.append((row["kernel_name"], row, a and (a["count"], a.get("missing"), a.get("total_ns"))))
    check(not mism and len(g) == len(agg),
          f"kernel aggregates = recomputation from the parts: {len(g)} kernel names, counts, missing ({missing} rows "
          f"without a duration) and total ns exact" + (f"; first mismatch {mism[0]}" if mism else ""))
    # Quantiles: DDSketch's relative error (1 %) against the rank's value, on the 5 names with
    # the most GPU time.
    top = sorted(g, key=lambda r: -(r["duration_ns_sum"] or 0))[:5]
    worst = 0.0
    for row in top:
        name = row["kernel_name"]
        d = pc.filter(k["duration_ns"], pc.equal(k["kernel_name"], name)).drop_null().to_numpy()
        d.sort()
        for q, key in ((0.5, "p50_ns"), (0.9, "p90_ns"), (0.99, "p99_ns")):
            exact = d[min(len(d) - 1, int(q * (len(d) - 1)))]
            got = agg[name].get(key)
            if got is not None and exact > 0:
                worst = max(worst, abs(got - exact) / exact)
    check(worst <= 0.02, f"p50/p90/p99 of the 5 kernels with the most GPU time within {worst * 100:.2f} % of the rows' own")

s = table("steps", ["step"])
if s is not None:
    steps = sorted(s["step"].to_pylist())
    ok = steps == list(range(len(steps)))
    check(ok, f"steps/ holds {len(steps)} rows, one per step, numbered 0..{len(steps) - 1} without gap or repeat")
    if streamed:
        check(len(steps) == streamed["steps"], f"steps rows ({len(steps)}) = streamed.steps ({streamed['steps']})")
    if stdout:
        printed = [int(m.group(1)) for l in open(stdout) if (m := re.search(r" step +(\d+)/", l))]
        ended = (report or {}).get("meta", {}).get("run_end") or {}
        signalled = isinstance(ended, dict) and ended.get("kind") == "signal"
        if printed and not signalled:
            # llm.c prints each step once it is done; the last step's range is a row too.
            n = len(printed)
            check(len(steps) in (n, n + 1), f"steps rows ({len(steps)}) = steps the program printed ({n}), or one more (the last, open)")
        elif printed:
            # A signal stops profiling before the program stops: the steps it ran while
            # gmprof wrote its outputs are not in them (said in the report's warnings).
            print(f"INFO steps rows {len(steps)}, steps the program printed {len(printed)}: ended by a signal, "
                  f"{len(printed) - len(steps)} step(s) ran after profiling stopped")

size = 0
for root, _, files in os.walk(run):
    for f in files:
        size += os.path.getsize(os.path.join(root, f))
if nk:
    print(f"on disk: {size / 2**20:.1f} MiB in all, {size / nk:.2f} bytes per kernel")
sys.exit(1 if failed else 0)
