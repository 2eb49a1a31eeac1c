"""Checks a gmprof output of one process that used several GPUs (scripts/multi/two_gpus.py).

    python3 scripts/multi/check_devices.py counts OUT REFERENCE.json
        kernels per device in OUT's kernels.csv against torch.profiler's counts (two_gpus.py
        --count), flagged rows, and that every range's total equals the sum of its
        range_devices.csv rows.
    python3 scripts/multi/check_devices.py dram PIPELINE_OUT ALONE_OUT [DEVICE]
        per_kernel DRAM read bytes of the pipeline's kernels on DEVICE (default 1) against
        the same kernels run alone on one GPU (two_gpus.py alone), paired in launch order.
Prints one line per check, starting PASS or FAIL.
"""
import csv
import difflib
import re
import glob
import json
import os
import statistics
import sys


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def out_dir(out):
    if os.path.exists(os.path.join(out, "report.json")):
        return out
    found = sorted(glob.glob(os.path.join(out, "**", "report.json"), recursive=True))
    if not found:
        sys.exit(f"check_devices: no report.json under {out}")
    return os.path.dirname(found[0])


def norm(name):
    """One spelling for torch.profiler's and CUPTI's demangled names."""
    name = re.sub(r"\(unsigned long\)(\d+)", r"\1ul", name)
    return re.sub(r"\bvoid ", "", name)


def kernels(d):
    return [r for r in rows(os.path.join(d, "kernels.csv")) if r["granularity"] in ("kernel", "graph_node")]


def counts(out, reference):
    d = out_dir(out)
    ks = kernels(d)
    mine = {}
    for k in ks:
        mine[k["device_id"]] = mine.get(k["device_id"], 0) + 1
    ref = json.load(open(reference))["kernels_per_device"]
    ok = all(mine.get(dev, 0) == n for dev, n in ref.items()) and set(mine) <= set(ref)
    print(f"{'PASS' if ok else 'FAIL'} kernels per device: gmprof {dict(sorted(mine.items()))} torch.profiler {dict(sorted(ref.items()))} ({d})")
    if not ok:
        from collections import Counter
        names = json.load(open(reference)).get("names_per_device", {})
        for dev in sorted(set(mine) | set(ref)):
            a = Counter(norm(k["kernel_name"]) for k in ks if k["device_id"] == dev)
            b = Counter(norm(n) for n in names.get(dev, []))
            print(f"  device {dev}: only gmprof {dict((a - b).most_common(5))}; only torch.profiler {dict((b - a).most_common(5))}")
    flagged = [k for k in ks if k["status"] != "ok"]
    print(f"{'PASS' if not flagged else 'FAIL'} flagged kernel rows: {len(flagged)}")
    report = json.load(open(os.path.join(d, "report.json")))
    meta = report["meta"]
    devices = [(x["device_id"], x["kernel_count"]) for x in meta.get("devices", [])]
    unprof = meta.get("unprofiled_contexts", [])
    print(f"{'PASS' if len(devices) == len(ref) and not unprof else 'FAIL'} meta.devices {devices} unprofiled {unprof} mode {meta['mode']}")
    ranges = rows(os.path.join(d, "ranges.csv"))
    path = os.path.join(d, "range_devices.csv")
    shares = rows(path) if os.path.exists(path) else []
    by = {}
    for s in shares:
        key = (s["range_slot"], s["range_generation"])
        k, t = by.get(key, (0, 0))
        by[key] = (k + int(s["kernel_count"]), t + int(s["gpu_time_ns"] or 0))
    bad = 0
    for r in ranges:
        if r["range_slot"] == "":
            continue
        k, t = by.get((r["range_slot"], r["range_generation"]), (0, 0))
        if k != int(r["kernel_count"]) or (r["gpu_time_ns"] and t != int(r["gpu_time_ns"])):
            bad += 1
    both = sum(1 for key in by if sum(1 for s in shares if (s["range_slot"], s["range_generation"]) == key) > 1)
    print(f"{'PASS' if bad == 0 and shares else 'FAIL'} ranges {len(ranges)}: totals equal the sum of their {len(shares)} device rows "
          f"({bad} differ); {both} ranges ran kernels on more than one device")
    summary = os.path.join(d, "summary.txt")
    if os.path.exists(summary):
        print("summary: " + open(summary).read().splitlines()[1])


def dram(pipeline, alone, device="1"):
    metric = "dram__bytes_read.sum"
    a = [k for k in kernels(out_dir(pipeline)) if k["device_id"] == device]
    b = kernels(out_dir(alone))
    errors = []
    # Paired in launch order along the longest common runs of names.
    match = difflib.SequenceMatcher(None, [norm(k["kernel_name"]) for k in a], [norm(k["kernel_name"]) for k in b], autojunk=False)
    pairs = [(a[blk.a + i], b[blk.b + i]) for blk in match.get_matching_blocks() for i in range(blk.size)]
    mismatched = len(a) - len(pairs)
    for x, y in pairs:
        vx, vy = x.get(metric, ""), y.get(metric, "")
        if vx == "" or vy == "" or float(vy) < 1e6:
            continue
        errors.append(abs(float(vx) - float(vy)) / float(vy) * 100)
    if not errors:
        print(f"FAIL dram: nothing to compare ({len(a)} vs {len(b)} kernels)")
        return
    errors.sort()
    med = statistics.median(errors)
    p90 = errors[int(0.9 * (len(errors) - 1))]
    print(f"{'PASS' if med <= 1.0 else 'FAIL'} {metric} on device {device} vs alone: {len(errors)} kernels (>= 1 MB) compared, "
          f"median {med:.3f} %, p90 {p90:.3f} %, max {errors[-1]:.3f} %; {len(a)} vs {len(b)} kernels, {len(pairs)} paired by name, {mismatched} unpaired")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "counts":
        counts(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "dram":
        dram(*sys.argv[2:5])
    else:
        sys.exit(__doc__)
