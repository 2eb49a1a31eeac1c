#!/usr/bin/env python3
"""Compares the instructions gmprof's probes counted per kernel launch with ncu's.

    sass_compare.py --ncu NCU_CSV --gmprof RUN_DIR [--coverage RUN_DIR] [--tol 0.01]

NCU_CSV: `ncu --csv --print-units base --print-kernel-base mangled --metrics
smsp__inst_executed.sum,... PROGRAM`. RUN_DIR: a `gmprof run --probe exec_count` directory
(probes.csv, probe_kernels.csv; with --probe-sass always every kernel is counted through SASS
metrics). Launches are paired per mangled kernel name in launch order (ncu's IDs, gmprof's
correlation ids). Prints one line per kernel: launches paired, gmprof's and ncu's
instructions of the first pair, the largest relative difference, and its family (cuBLAS,
aten, Triton, attention, other); then how many kernels agree within --tol.

--coverage RUN_DIR: the share of GPU time (kernels.csv, trace mode) whose launches have probe
data, and by which source.
"""
import argparse
import csv
import sys
from collections import defaultdict


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(l for l in f if not l.startswith("#")))


def read_ncu(path):
    by_id = {}
    order = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        key = r["ID"]
        if key not in by_id:
            by_id[key] = {"name": r["Kernel Name"]}
            order.append(key)
        try:
            by_id[key][r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            pass
    return [by_id[k] for k in order]


def family(name):
    n = name.lower()
    if "triton" in n:
        return "Triton"
    if "fmha" in n or "flash" in n or "cudnn" in n or "attention" in n:
        return "attention"
    if "gemm" in n or "cublas" in n or "xmma" in n or n.startswith(("sm90_", "nvjet")) or "cutlass" in n:
        return "cuBLAS"
    if "at6native" in n or "at::native" in n or "_zn2at" in n:
        return "aten"
    return "other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncu", required=True)
    ap.add_argument("--gmprof", required=True)
    ap.add_argument("--coverage")
    ap.add_argument("--tol", type=float, default=0.01)
    a = ap.parse_args()

    mangled = {}
    for k in rows(a.gmprof + "/probe_kernels.csv"):
        mangled.setdefault(k["kernel"], k["mangled"])
    launches = defaultdict(list)
    for r in sorted(rows(a.gmprof + "/probes.csv"), key=lambda r: int(r["correlation_id"])):
        if r["probe"] == "exec_count" and r["field"] == "instructions":
            launches[mangled.get(r["kernel"], r["kernel"])].append(float(r["total"]))
    ncu = defaultdict(list)
    for k in read_ncu(a.ncu):
        if "smsp__inst_executed.sum" in k:
            ncu[k["name"]].append(k["smsp__inst_executed.sum"])

    agree = defaultdict(int)
    kernels = 0
    worst = []
    for name in sorted(set(launches) & set(ncu), key=lambda n: -sum(ncu[n])):
        g, n = launches[name], ncu[name]
        pairs = list(zip(g, n))
        if not pairs:
            continue
        rel = max(abs(x / y - 1) if y else (0.0 if x == 0 else 1.0) for x, y in pairs)
        kernels += 1
        fam = family(name)
        ok = rel <= a.tol
        agree[fam] += ok
        worst.append(rel)
        print("%-9s %-6s %4d pairs (gmprof %d, ncu %d)  first %14.0f vs %14.0f  max |rel| %.5f  %s"
              % (fam, "ok" if ok else "DIFF", len(pairs), len(g), len(n), pairs[0][0], pairs[0][1], rel, name[:90]))
    only_g = sorted(set(launches) - set(ncu))
    only_n = sorted(set(ncu) - set(launches))
    print("kernels compared: %d; within %.1f%%: %d (%s); only gmprof: %d; only ncu: %d"
          % (kernels, a.tol * 100, sum(agree.values()), dict(agree), len(only_g), len(only_n)))
    for n in only_n[:10]:
        print("  only ncu: %s (%d launches)" % (n[:100], len(ncu[n])))

    if a.coverage:
        for d in [a.coverage, a.gmprof]:
            ks = rows(d + "/kernels.csv")
            total = sum(float(k["duration_ns"] or 0) for k in ks)
            by = defaultdict(float)
            for k in ks:
                src = k.get("probe_source") or ("not probed: " + (k.get("probe_status") or "no launch record")[:60])
                if k.get("probe_status") != "probed":
                    src = "not probed"
                by[src] += float(k["duration_ns"] or 0)
            parts = ", ".join("%s %.2f%%" % (s, 100 * v / total) for s, v in sorted(by.items(), key=lambda x: -x[1]))
            print("GPU time by probe source (%s, %d kernel rows): %s" % (d.rsplit("/", 1)[-1], len(ks), parts))


if __name__ == "__main__":
    sys.exit(main())
