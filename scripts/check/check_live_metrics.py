#!/usr/bin/env python3
"""Checks what a real Prometheus scraped from gmprof's live metrics against the run's own
outputs (issue 45): report.json's streamed summary (its steps table and aggregates).

Run by scripts/check/live_metrics_prometheus.sh once the run wrote its outputs (OUT/done):
waits until Prometheus has scraped the run's last step count (or --timeout passes), then
queries its HTTP API (/api/v1/query) and checks, exactly where gmprof's numbers are whole
nanoseconds or counts:

- gmprof_steps_total = the steps table's rows (report.json streamed.steps), and the series
  was scraped while the run went on (samples between 0 and the last count, never falling);
- the last step's number, wall time, GPU time and kernels = the steps table's last row;
- gmprof_step_wall_seconds_count and _sum = the steps table's count and sum of wall time;
- per range group (numbers folded): instances and GPU and wall time = the aggregates';
- kernels, their GPU time, transfers = the run's;
- every series carries job, instance, device, host, and rank = --rank.

Prints one line per check and "live metrics: N checks agree, M disagree"; exits 1 when one
disagrees. Standard library only.
"""

import argparse
import json
import sys
import time
import urllib.parse
import urllib.request


def query(base, expr, at=None):
    params = {"query": expr}
    if at is not None:
        params["time"] = str(at)
    url = f"{base}/api/v1/query?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]


def vector(base, expr):
    """[(labels, value)] of an instant vector."""
    data = query(base, expr)
    return [(r["metric"], float(r["value"][1])) for r in data["result"]]


def one(base, expr):
    """The value of the one series `expr` selects, or None when there is none."""
    got = vector(base, expr)
    if len(got) > 1:
        raise RuntimeError(f"{expr}: {len(got)} series, expected one: {got}")
    return got[0][1] if got else None


def ns(seconds):
    return None if seconds is None else round(seconds * 1e9)


class Checks:
    def __init__(self):
        self.agree = 0
        self.disagree = 0

    def equal(self, what, got, want):
        if got == want:
            self.agree += 1
            print(f"  ok    {what}: {got}")
        else:
            self.disagree += 1
            print(f"  WRONG {what}: Prometheus has {got}, the run's outputs say {want}")

    def true(self, what, ok, detail):
        if ok:
            self.agree += 1
            print(f"  ok    {what}")
        else:
            self.disagree += 1
            print(f"  WRONG {what}: {detail}")


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return True
        except (OSError, RuntimeError, ValueError):
            pass
        if time.monotonic() > deadline:
            print(f"gmprof: waited {timeout} s for {what}", file=sys.stderr)
            return False
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prometheus", required=True, help="Prometheus's URL, http://127.0.0.1:9090")
    ap.add_argument("--out", required=True, help="the run's output directory (report.json)")
    ap.add_argument("--job", default="gmprof", help="the scrape job's name")
    ap.add_argument("--rank", help="the rank label every series must carry")
    ap.add_argument("--timeout", type=float, default=60, help="seconds to wait for the run and the scrapes")
    a = ap.parse_args()
    base = a.prometheus.rstrip("/")
    sel = f'job="{a.job}"'

    import os

    done = os.path.join(a.out, "done")
    if not wait_for(lambda: os.path.exists(done), a.timeout, f"{done} (the run's end)"):
        return 1
    with open(os.path.join(a.out, "report.json")) as f:
        streamed = json.load(f)["streamed"]
    table = streamed["steps_table"]
    steps = streamed["steps"]
    # Prometheus scrapes every second: wait until it has the run's last values.
    wait_for(lambda: one(base, f"gmprof_steps_total{{{sel}}}") == steps, a.timeout, "the last step count's scrape")
    wait_for(
        lambda: one(base, f"gmprof_kernels_total{{{sel}}}") == streamed["kernels"], a.timeout, "the last kernels' scrape"
    )

    c = Checks()
    print(f"live metrics of {a.out} scraped by {base}:")
    c.equal("gmprof_steps_total = steps table rows", one(base, f"gmprof_steps_total{{{sel}}}"), steps)
    c.true("report.json's steps table holds every step", len(table) == steps, f"{len(table)} rows, {steps} steps")
    walls = [r["wall_time_ns"] for r in table if r.get("wall_time_ns") is not None]
    c.equal("gmprof_step_wall_seconds_count", one(base, f"gmprof_step_wall_seconds_count{{{sel}}}"), len(walls))
    got_sum = one(base, f"gmprof_step_wall_seconds_sum{{{sel}}}")
    c.true(
        "gmprof_step_wall_seconds_sum = sum of the steps' wall time",
        got_sum is not None and abs(got_sum - sum(walls) / 1e9) <= 1e-9 * max(1.0, sum(walls) / 1e9),
        f"{got_sum} s against {sum(walls)} ns",
    )
    last = table[-1]
    c.equal("gmprof_last_step", one(base, f"gmprof_last_step{{{sel}}}"), last["step"])
    c.equal("gmprof_last_step_wall_seconds (ns)", ns(one(base, f"gmprof_last_step_wall_seconds{{{sel}}}")), last["wall_time_ns"])
    c.equal("gmprof_last_step_gpu_seconds (ns)", ns(one(base, f"gmprof_last_step_gpu_seconds{{{sel}}}")), last["gpu_time_ns"])
    c.equal("gmprof_last_step_kernels", one(base, f"gmprof_last_step_kernels{{{sel}}}"), last["kernels"])
    c.equal("gmprof_last_step_transfers", one(base, f"gmprof_last_step_transfers{{{sel}}}"), last["transfers"])

    # Scraped while the run went on: the step count rose through values below the last.
    history = query(base, f"gmprof_steps_total{{{sel}}}[10m]")["result"]
    values = [float(v) for _, v in history[0]["values"]] if history else []
    c.true(
        "gmprof_steps_total scraped while the run went on (0 < value < last, never falling)",
        any(0 < v < steps for v in values) and all(x <= y for x, y in zip(values, values[1:])),
        f"samples {values}",
    )

    aggregates = streamed["aggregates"]
    groups = [g for g in aggregates if g["table"] == "range" and g["quantity"] == "gpu_time_ns"]
    c.true("range groups in report.json", len(groups) > 0, "none")
    for g in groups:
        r = f'{sel},range="{g["key"]}"'
        # Every instance, those without a GPU time (missing) too.
        c.equal(f'gmprof_range_instances_total{{range="{g["key"]}"}}', one(base, f"gmprof_range_instances_total{{{r}}}"), g["count"] + g.get("missing", 0))
        c.equal(f'gmprof_range_gpu_seconds_total{{range="{g["key"]}"}} (ns)', ns(one(base, f"gmprof_range_gpu_seconds_total{{{r}}}")), g.get("total_ns"))
    for g in (g for g in aggregates if g["table"] == "range" and g["quantity"] == "wall_time_ns"):
        r = f'{sel},range="{g["key"]}"'
        c.equal(f'gmprof_range_wall_seconds_total{{range="{g["key"]}"}} (ns)', ns(one(base, f"gmprof_range_wall_seconds_total{{{r}}}")), g.get("total_ns"))
    exported = {m["range"] for m, _ in vector(base, f"gmprof_range_instances_total{{{sel}}}")}
    c.equal("range groups exported", sorted(exported), sorted(g["key"] for g in groups))

    kernels = [g for g in aggregates if g["table"] == "kernel"]
    c.equal("gmprof_kernels_total", one(base, f"gmprof_kernels_total{{{sel}}}"), streamed["kernels"])
    c.equal("kernels in the aggregates", sum(g["count"] for g in kernels), streamed["kernels"])
    c.equal("gmprof_kernel_gpu_seconds_total (ns)", ns(one(base, f"gmprof_kernel_gpu_seconds_total{{{sel}}}")), sum(g["total_ns"] for g in kernels))
    c.equal("gmprof_transfers_total", one(base, f"gmprof_transfers_total{{{sel}}}"), streamed["transfers"])

    series = vector(base, f'{{__name__=~"gmprof_.*",{sel}}}')
    # gmprof_build_info is the process's, not a device's.
    missing = [m for m, _ in series if not {"job", "instance", "host"} <= m.keys()]
    missing += [m for m, _ in series if m["__name__"] != "gmprof_build_info" and "device" not in m]
    c.true(f"every series ({len(series)}) has job, instance, host and (but the build info) device", series and not missing, missing[:3])
    if a.rank is not None:
        wrong = [m for m, _ in series if m.get("rank") != a.rank]
        c.true(f'every series has rank="{a.rank}"', not wrong, wrong[:3])

    print(f"live metrics: {c.agree} checks agree, {c.disagree} disagree")
    return 1 if c.disagree else 0


if __name__ == "__main__":
    sys.exit(main())
