"""Checks the outputs of examples/c/device_timers.cu (scripts/gpu-device-timers-validate.sh).

    python3 scripts/device_timers_check.py OUT_DIR SM_COUNT

Prints one line per check, "ok" or "FAIL", and exits non-zero if any failed:
- the spin regions (1 us, 10 us, 1 ms) decode within 2 % or 100 ns of the spin time;
- the long spin (> 5 s) decodes to its length with no wrap, and fits in its kernel's
  CUPTI duration;
- every launch has each recording lane exactly once, SM ids below SM_COUNT, nothing torn;
- the overflow launch counts exactly 5 records per lane;
- every region event of trace.json lies inside its kernel's slice.
"""

import json
import sys

out, sm_count = sys.argv[1], int(sys.argv[2])
report = json.load(open(out + "/report.json"))
trace = json.load(open(out + "/trace.json"))
failed = []


def check(ok, what):
    print("%s %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        failed.append(what)


kernels = {k["correlation_id"]: k for k in report["kernels"]}
launches = report["device_timers"]
print("launches with timers: %d" % len(launches))
for l in launches:
    lanes = l["spans"]["lanes"]
    name = (l.get("kernel_name") or "?").split("(")[0]
    sms = l["spans"]["sms"]
    check(l["correlation_id"] in kernels, "%s: joined to kernel row %s (range %s)" % (name, l["correlation_id"], l.get("range_path")))
    check(
        lanes["started"] == lanes["expected"] and lanes["repeated"] == 0 and lanes["misplaced"] == 0,
        "%s: every lane once: expected %d started %d finished %d repeated %d misplaced %d"
        % (name, lanes["expected"], lanes["started"], lanes["finished"], lanes["repeated"], lanes["misplaced"]),
    )
    check(bool(sms) and max(sms) < sm_count, "%s: SM ids %d..%d < %d" % (name, min(sms), max(sms), sm_count))
    check(l["torn"] == 0 and l["stray"] == 0, "%s: torn %d stray %d" % (name, l["torn"], l["stray"]))

spin_targets = {"spin_1us": 1000, "spin_10us": 10000, "spin_1ms": 1000000}
errors = {k: [] for k in spin_targets}
for l in launches:
    if not (l.get("kernel_name") or "").startswith("spin("):
        continue
    for s in l["spans"]["spans"]:
        name = l["region_names"][s["region"]]
        if name in spin_targets:
            errors[name].append(s["end_ns"] - s["start_ns"] - spin_targets[name])
for name, target in spin_targets.items():
    errs = errors[name]
    tol = max(0.02 * target, 100)
    worst = max(errs, key=abs) if errs else None
    check(
        bool(errs) and all(abs(e) <= tol for e in errs),
        "accuracy %s: %d spans, error min %s max %s ns (tolerance %.0f ns), mean %.1f ns"
        % (name, len(errs), min(errs) if errs else "-", max(errs) if errs else "-", tol, sum(errs) / max(len(errs), 1)),
    )
    del worst

for l in launches:
    if not (l.get("kernel_name") or "").startswith("long_spin"):
        continue
    span = l["spans"]["spans"][0]
    target = span["begin_payload"] * 1000000
    d = span["end_ns"] - span["start_ns"]
    k = kernels.get(l["correlation_id"], {})
    kd = k.get("duration_ns")
    check(d >= 2**32 and abs(d - target) <= max(0.02 * target, 100),
          "long spin: %d ns decoded for %d ns (> 2^32 = %d: no wrap), error %d ns" % (d, target, 2**32, d - target))
    check(kd is not None and d <= kd, "long spin: kernel duration by CUPTI %s ns >= region %d ns (kernel - region = %s ns)"
          % (kd, d, None if kd is None else kd - d))

over = [l for l in launches if l.get("range_path") == "overflow"]
for l in over:
    expected = 5 * l["spans"]["lanes"]["expected"]
    check(l["header"]["overflow"] == expected, "overflow: counted %d records, expected %d (5 per lane)" % (l["header"]["overflow"], expected))
check(len(over) == 1, "overflow launch present")

regions_csv = open(out + "/regions.csv").read()
check("overflow_records=%d" % sum(l["header"]["overflow"] for l in launches) in regions_csv, "regions.csv header counts the overflow")

# Region events inside their kernel's slice (tolerance: the fitted clock's slack).
info = trace["otherData"].get("device_timers") or {}
print("trace device_timers: %s" % json.dumps(info))
slices = {}
for e in trace["traceEvents"]:
    if e.get("cat") == "kernel":
        slices[e["args"]["correlation_id"]] = (e["ts"], e["ts"] + e["dur"])
outside, total, worst = 0, 0, 0.0
for e in trace["traceEvents"]:
    if e.get("cat") != "device_region":
        continue
    total += 1
    a, b = slices[e["args"]["correlation_id"]]
    start, end = e["ts"], e["ts"] + e.get("dur", 0)
    over_by = max(a - start, end - b, 0)
    worst = max(worst, over_by)
    outside += over_by > 0.002
check(total > 0 and info.get("placed") == len(launches), "trace: %d region events, %s of %d launches placed" % (total, info.get("placed"), len(launches)))
check(outside == 0, "trace: region events outside their kernel slice: %d (worst by %.3f us)" % (outside, worst))

print("FAILED: %d check(s)" % len(failed) if failed else "ALL CHECKS PASSED")
sys.exit(1 if failed else 0)
