"""Checks the outputs of examples/c/device_timers.cu (scripts/gpu/device-timers-validate.sh).

    python3 scripts/check/device_timers_check.py OUT_DIR SM_COUNT

Prints one line per check, "ok" or "FAIL", and exits non-zero if any failed:
- the spin regions (1 us, 10 us, 1 ms) decode within 2 % or 100 ns of the time the spin
  itself observed (its end payload) and of the nominal time; empty regions within 100 ns;
- the long spin (> 5 s) decodes to its length with no wrap, and fits in its kernel's
  CUPTI duration;
- every launch has each recording lane exactly once, SM ids below SM_COUNT, nothing torn;
- the overflow launch counts exactly 5 records per lane;
- every region event of trace.json lies inside its kernel's slice, the clock offsets come
  from the per-run fit, and the launches share exactly as many offsets as there are runs.
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

# Accuracy: each spin's end payload is what the spin itself observed beyond its nominal time
# (its first to its last %globaltimer read, minus the nominal ns). The decoded span is checked
# against both the observed time (what the markers add: their own cost inside the region)
# and the nominal one (that plus the spin's exit: the timer's step and the loop's period).
spin_targets = {"spin_1us": 1000, "spin_10us": 10000, "spin_1ms": 1000000}
vs_nominal = {k: [] for k in spin_targets}
vs_observed = {k: [] for k in spin_targets}
for l in launches:
    if not (l.get("kernel_name") or "").startswith("spin("):
        continue
    for s in l["spans"]["spans"]:
        name = l["region_names"][s["region"]]
        if name in spin_targets:
            d = s["end_ns"] - s["start_ns"]
            vs_nominal[name].append(d - spin_targets[name])
            vs_observed[name].append(d - spin_targets[name] - s["end_payload"])


def stats(errs):
    if not errs:
        return "no spans"
    return "error min %d max %d mean %.1f ns" % (min(errs), max(errs), sum(errs) / len(errs))


for name, target in spin_targets.items():
    tol = max(0.02 * target, 100)
    for what, errs in (("observed", vs_observed[name]), ("nominal", vs_nominal[name])):
        check(
            bool(errs) and all(abs(e) <= tol for e in errs),
            "accuracy %s vs %s: %d spans, %s (tolerance %.0f ns)" % (name, what, len(errs), stats(errs), tol),
        )
    over = [n - o for n, o in zip(vs_nominal[name], vs_observed[name])]
    print("     %s: the spin observed %s beyond %d ns" % (name, stats(over).replace("error ", ""), target))

# Empty regions (begin then end, nothing between): the markers' own cost inside a span.
for l in launches:
    if not (l.get("kernel_name") or "").startswith("empty("):
        continue
    ds = [s["end_ns"] - s["start_ns"] for s in l["spans"]["spans"]]
    check(bool(ds) and max(ds) <= 100, "empty regions: %d spans, decoded min %s max %s mean %.1f ns (<= 100 ns)"
          % (len(ds), min(ds) if ds else "-", max(ds) if ds else "-", sum(ds) / max(len(ds), 1)))

for l in launches:
    if not (l.get("kernel_name") or "").startswith("long_spin"):
        continue
    span = l["spans"]["spans"][0]
    target = span["begin_payload"] * 1000000
    observed = target + span["end_payload"]
    d = span["end_ns"] - span["start_ns"]
    k = kernels.get(l["correlation_id"], {})
    kd = k.get("duration_ns")
    tol = max(0.02 * target, 100)
    check(d >= 2**32 and abs(d - target) <= tol and abs(d - observed) <= 100,
          "long spin: %d ns decoded for %d ns nominal, %d ns observed by the spin (> 2^32 = %d: no wrap), error %d ns "
          "vs nominal, %d ns vs observed" % (d, target, observed, 2**32, d - target, d - observed))
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

# The clock fit: trace mode has measured kernel times, so the offsets must come from the
# fit over runs of launches (not each launch alone), and the launches of one run must share
# one offset. A launch's offset, as drawn: its earliest event (us, from the trace's origin)
# minus its earliest span or instant (%globaltimer ns, from report.json).
check(info.get("clock") in ("one offset for all launches", "offsets fitted per run of launches") and info.get("runs", 0) >= 1,
      "trace: clock %r, %s run(s), largest slack %s ns" % (info.get("clock"), info.get("runs"), info.get("slack_ns")))
first_event = {}
for e in trace["traceEvents"]:
    if e.get("cat") == "device_region":
        cid = e["args"]["correlation_id"]
        first_event[cid] = min(first_event.get(cid, e["ts"]), e["ts"])
firsts = []
for l in launches:
    stamps = [s["start_ns"] for s in l["spans"]["spans"]] + [i["ts_ns"] for i in l["spans"]["instants"]]
    if stamps and l["correlation_id"] in first_event:
        firsts.append((first_event[l["correlation_id"]], min(stamps), l["correlation_id"]))
# Relative to the first launch: both clocks' absolute values are too large for a double's
# nanoseconds (Unix time on some machines).
offsets = [((ts - firsts[0][0]) * 1000.0 - (gt - firsts[0][1]), cid) for ts, gt, cid in firsts]
offsets.sort()
groups = []
for off, cid in offsets:
    if groups and off - groups[-1][-1][0] <= 2.0:  # ns: the trace's microseconds as text
        groups[-1].append((off, cid))
    else:
        groups.append([(off, cid)])
check(bool(offsets) and len(groups) == info.get("runs"),
      "trace: %d launches drawn with %d distinct offsets for %s fitted run(s): %s" % (
          len(offsets), len(groups), info.get("runs"),
          "; ".join("%d launch(es) at %.0f ns" % (len(g), g[0][0] - offsets[0][0]) for g in groups)))

print("FAILED: %d check(s)" % len(failed) if failed else "ALL CHECKS PASSED")
sys.exit(1 if failed else 0)
