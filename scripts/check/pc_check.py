#!/usr/bin/env python3
"""Checks a `gmprof run --pc-sampling` directory and compares its stall shares with ncu's.

    pc_check.py invariant RUN_DIR
    pc_check.py top-kernels RUN_DIR [N]          mangled names of the N (8) kernels with most samples
    pc_check.py ncu-metrics RUN_DIR              the ncu --metrics list: every state of stalls.csv
    pc_check.py compare RUN_DIR NCU_CSV [--top 8] [--tol 5] [--need 5]
    pc_check.py overhead LABEL LIMIT NATIVE_LOG... -- RUN_LOG...

invariant: from report.json's pc section (gmprof's own outputs, not recomputed from them):
  - Σ over kernels of their samples = the samples in PC records (`sampled`);
  - every range's samples are the Σ of its reason columns, and at least the Σ of its direct
    child ranges' (a range's samples are its launches', nested ranges included);
  - the top-level ranges (or the root row) hold every sample of a launched function:
    Σ depth-0 = sampled − unattributed (when there is no root row);
  - the acceptance's invariant, range by range: a range's samples = Σ of the samples of the
    kernels launched in it and in its descendants (`range_kernels`: each range's own launches
    of each function), and each launched kernel's samples = Σ of its per-range shares;
  - losses: dropped samples, drains with a full hardware buffer, samples in no range.
  Prints PASS/FAIL lines.

compare: ncu's CSV (`ncu --csv --print-units base --print-kernel-base mangled --metrics
smsp__pcsamp_warps_issue_stalled_*`), summed per mangled kernel name over its launches; the
share of each state is its samples over the Σ of the states (the `_not_issued` twins left
out), as ncu's WarpStateStats shows. For each of the --top kernels with the most gmprof
samples (and at least 100), the shares of gmprof's top three states against ncu's: PASS when
all three are within --tol percentage points. The whole comparison passes when at least
--need kernels pass.

overhead: median iteration time of llm.c (`step N/M | ... (X ms | ...`) or nanoGPT
(`iter N: loss L, time Xms`) logs, steps after the first two, pooled per side; prints the
ratio, PASS when it is at most LIMIT.
"""
import csv
import json
import re
import statistics
import sys

PREFIX = "smsp__pcsamp_warps_issue_stalled_"


def report(run):
    with open(run + "/report.json") as f:
        return json.load(f)


def invariant(run):
    rep = report(run)
    pc = rep.get("pc")
    if not pc:
        print("FAIL %s: report.json has no pc section" % run)
        return 1
    ok = True

    def check(cond, text):
        nonlocal ok
        print(("PASS " if cond else "FAIL ") + text)
        ok = ok and cond

    sampled, unattributed = pc["sampled"], pc["unattributed_samples"]
    print("== %s: %d samples in PC records of %d counted, every 2^%s cycles, %s collection, attribution %s"
          % (run, sampled, pc["total_samples"], pc["period_exponent"], pc["collection"], pc["attribution"]))
    print("== losses: dropped %d (%.3f %%), hardware buffer full in %d of %d drains, non-user %d, in no range %d"
          % (pc["dropped_samples"], 100.0 * pc["dropped_samples"] / max(1, pc["total_samples"]),
             pc["hardware_buffer_full"], pc["drains"], pc["non_user_samples"], unattributed))
    check(sampled > 0, "PC records have samples (%d)" % sampled)
    ksum = sum(k["counts"]["samples"] for k in pc["kernels"])
    check(ksum == sampled, "Σ kernels' samples %d = samples in records %d" % (ksum, sampled))
    ranges = rep["ranges"]
    by_index = {r["range_index"]: r for r in pc["ranges"]}
    bad_sum = [r["path"] for r in pc["ranges"] if sum(r["counts"]["by_reason"]) != r["counts"]["samples"]]
    check(not bad_sum, "every range's samples = Σ of its reason columns (%d ranges; bad: %s)"
          % (len(pc["ranges"]), bad_sum[:3]))
    slot_of = {}
    for i, r in enumerate(ranges):
        if r.get("range_id"):
            slot_of[(r["range_id"]["slot"], r["range_id"]["generation"])] = i
    children = {}
    for i, r in enumerate(ranges):
        p = r.get("parent_id")
        if p:
            parent = slot_of.get((p["slot"], p["generation"]))
            if parent is not None:
                children.setdefault(parent, []).append(i)
    bad_nest = []
    for i, kids in children.items():
        mine = by_index.get(i, {"counts": {"samples": 0}})["counts"]["samples"]
        theirs = sum(by_index.get(k, {"counts": {"samples": 0}})["counts"]["samples"] for k in kids)
        if mine < theirs:
            bad_nest.append((ranges[i]["path"], mine, theirs))
    check(not bad_nest, "every range has at least its child ranges' samples (%d parents; bad: %s)"
          % (len(children), bad_nest[:3]))
    root = [r for r in pc["ranges"] if r["path"] == "<root>"]
    if root:
        total = root[0]["counts"]["samples"]
        check(total == sampled - unattributed, "the root row's samples %d = sampled − in no range %d"
              % (total, sampled - unattributed))
    else:
        total = sum(r["counts"]["samples"] for r in pc["ranges"] if r["depth"] == 0)
        check(total == sampled - unattributed, "Σ top-level ranges' samples %d = sampled − in no range %d"
              % (total, sampled - unattributed))
    # Range by range: its samples = Σ over the launches made in it and in its descendants.
    parent = {}
    for i, kids in children.items():
        for k in kids:
            parent[k] = i

    def inside(at, i):
        while at is not None:
            if at == i:
                return True
            at = parent.get(at)
        return False

    bad_sum = []
    groups = pc.get("range_kernels", [])
    for r in pc["ranges"]:
        i = r["range_index"]
        if ranges[i].get("range_id") is None:
            total_i = sum(g["samples"] for g in groups)
        else:
            total_i = sum(g["samples"] for g in groups if inside(g["range_index"], i))
        if total_i != r["counts"]["samples"]:
            bad_sum.append((r["path"], r["counts"]["samples"], total_i))
    check(groups and not bad_sum, "every range's samples = Σ of its kernels' samples (its own launches and its "
          "descendants'; %d ranges, %d (range, kernel) groups; bad: %s)" % (len(pc["ranges"]), len(groups), bad_sum[:3]))
    per_fn = {}
    for g in groups:
        per_fn[g["function"]] = per_fn.get(g["function"], 0) + g["samples"]
    bad_fn = [k["function"][:40] for k in pc["kernels"] if k["launches"] > 0 and per_fn.get(k["function"], 0) != k["counts"]["samples"]]
    check(not bad_fn, "every launched kernel's samples = Σ of its per-range shares (bad: %s)" % bad_fn[:3])
    few = sum(1 for r in pc["ranges"] if r["counts"]["samples"] < pc["min_samples"])
    print("== %d of %d range rows have fewer than %d samples (no shares)" % (few, len(pc["ranges"]), pc["min_samples"]))
    return 0 if ok else 1


def top_kernels(run, n):
    pc = report(run)["pc"]
    return [k["function"] for k in pc["kernels"] if k["launches"] > 0][:n]


def read_ncu(path):
    per_kernel = {}
    launches = {}
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    seen = set()
    for r in csv.DictReader(lines):
        name = r["Kernel Name"]
        metric = r["Metric Name"]
        try:
            value = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        d = per_kernel.setdefault(name, {})
        d[metric] = d.get(metric, 0.0) + value
        if (r["ID"], name) not in seen:
            seen.add((r["ID"], name))
            launches[name] = launches.get(name, 0) + 1
    return per_kernel, launches


def compare(run, ncu_csv, top, tol, need):
    pc = report(run)["pc"]
    names = [c["name"] for c in pc["reasons"]]
    labels = [c["warp_state"] for c in pc["reasons"]]
    ncu, launches = read_ncu(ncu_csv)
    passed = compared = 0
    for k in [k for k in pc["kernels"] if k["launches"] > 0][:top]:
        c = k["counts"]
        label = (k.get("kernel_name") or k["function"])[:60]
        if c["samples"] < pc["min_samples"]:
            print("SKIP %s: %d gmprof samples (< %d)" % (label, c["samples"], pc["min_samples"]))
            continue
        n = ncu.get(k["function"])
        if not n:
            print("SKIP %s: not in ncu's CSV" % label)
            continue
        states = {m: v for m, v in n.items() if m.startswith(PREFIX) and not m.endswith("_not_issued")}
        total = sum(states.values())
        if total <= 0:
            print("SKIP %s: ncu has no pcsamp samples" % label)
            continue
        compared += 1
        order = sorted(range(len(names)), key=lambda i: (-c["by_reason"][i], i))[:3]
        diffs = []
        for i in order:
            ours = 100.0 * c["by_reason"][i] / c["samples"]
            theirs = 100.0 * states.get(names[i], 0.0) / total
            diffs.append((labels[i], ours, theirs))
        worst = max(abs(a - b) for _, a, b in diffs)
        ok = worst <= tol
        passed += ok
        print("%s %s: gmprof %d samples / ncu %d samples over %d launch(es): %s | largest difference %.1f pp"
              % ("PASS" if ok else "FAIL", label, c["samples"], total, launches.get(k["function"], 0),
                 ", ".join("%s %.1f%% vs %.1f%%" % d for d in diffs), worst))
    verdict = passed >= need
    print("%s %d of %d compared kernels have their top three stall shares within %.1f pp of ncu's (need %d)"
          % ("PASS" if verdict else "FAIL", passed, compared, tol, need))
    return 0 if verdict else 1


def iter_times(path):
    text = open(path, errors="replace").read()
    llmc = [(int(m.group(1)), float(m.group(2))) for m in re.finditer(r"step\s+(\d+)/\d+ \|.*?\| ([0-9.]+) ms \|", text)]
    ng = [(int(m.group(1)), float(m.group(2))) for m in re.finditer(r"iter (\d+): loss [0-9.]+, time ([0-9.]+)ms", text)]
    pairs = llmc or ng
    return [t for step, t in pairs if step > 2]


def overhead(label, limit, native, runs):
    a = [t for f in native for t in iter_times(f)]
    b = [t for f in runs for t in iter_times(f)]
    if not a or not b:
        print("FAIL %s: no iteration times (native %d, profiled %d)" % (label, len(a), len(b)))
        return 1
    ma, mb = statistics.median(a), statistics.median(b)
    ok = mb / ma <= limit
    print("%s %s: median iteration native %.3f ms (%d), profiled %.3f ms (%d): %.3fx (limit %.2fx)"
          % ("PASS" if ok else "FAIL", label, ma, len(a), mb, len(b), mb / ma, limit))
    return 0 if ok else 1


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    cmd = argv[0]
    if cmd == "invariant":
        return invariant(argv[1])
    if cmd == "top-kernels":
        for name in top_kernels(argv[1], int(argv[2]) if len(argv) > 2 else 8):
            print(name)
        return 0
    if cmd == "ncu-metrics":
        pc = report(argv[1])["pc"]
        print(",".join([c["name"] for c in pc["reasons"]] + ["smsp__pcsamp_sample_count"]))
        return 0
    if cmd == "compare":
        opts = {"--top": 8, "--tol": 5.0, "--need": 5}
        rest = argv[3:]
        for i in range(0, len(rest) - 1, 2):
            opts[rest[i]] = type(opts[rest[i]])(rest[i + 1])
        return compare(argv[1], argv[2], opts["--top"], opts["--tol"], opts["--need"])
    if cmd == "overhead":
        sep = argv.index("--")
        return overhead(argv[1], float(argv[2]), argv[3:sep], argv[sep + 1:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
