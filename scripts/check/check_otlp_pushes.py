#!/usr/bin/env python3
"""Checks the OTLP pushes of a run (received by scripts/check/otlp_receiver.py) against the
run's own outputs, per rank (issue 45: `gmprof run --otlp` on a GPU run).

    check_otlp_pushes.py RUN_DIR PUSHES.jsonl

RUN_DIR holds one report.json per process (a directory per rank, named HOST-RANK, or RUN_DIR
itself). Pushes are matched to ranks by the resource's `rank` attribute (0 without one).
Checks, per rank:

- pushes came while the run went on (a push with 0 < gmprof_steps < the run's steps) and
  gmprof_steps never fell;
- the last push (gmprof pushes once more after its last drain) equals the outputs:
  gmprof_steps = the steps table's rows; gmprof_last_step and its wall and GPU time = the
  table's last row (to the ns; a blank time is no point); gmprof_kernels = the kernels streamed; per range group,
  gmprof_range_instances (count + missing) and gmprof_range_gpu_seconds = the aggregates
  (to the ns);
- the resource has service.name gmprof and service.instance.id; no push failed
  (gmprof_otlp_push_failures is 0 or absent).

Prints one line per rank, and what disagreed; exits 1 when something did.
"""

import json
import sys

from check_live_scrapes import ns, rank_reports, value


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    run_dir, path = argv[1], argv[2]
    pushes = [json.loads(line) for line in open(path)]
    reports = rank_reports(run_dir)
    if reports is None:
        return 1
    bad = 0
    for rank, streamed in sorted(reports.items(), key=lambda kv: kv[0] or "0"):
        rank = int(rank or 0)
        table = streamed["steps_table"]
        mine = [p for p in pushes if int(p["resource"].get("rank", 0)) == rank]
        wrong = []
        steps_seen = [value(p["points"], "gmprof_steps") for p in mine]
        steps_seen = [s for s in steps_seen if s is not None]
        if any(b < a for a, b in zip(steps_seen, steps_seen[1:])):
            wrong.append(f"gmprof_steps fell: {steps_seen}")
        during = any(0 < s < len(table) for s in steps_seen)
        if not mine:
            wrong.append("no push")
        else:
            last = mine[-1]
            pts = last["points"]
            res = last["resource"]
            if res.get("service.name") != "gmprof" or not res.get("service.instance.id"):
                wrong.append(f"resource {res}")
            row = table[-1]
            checks = [
                ("gmprof_steps", value(pts, "gmprof_steps"), len(table)),
                ("gmprof_last_step", value(pts, "gmprof_last_step"), row["step"]),
                # A blank (unmeasured) time is no point at all, never 0.
                ("gmprof_last_step_wall_seconds (ns)", ns(value(pts, "gmprof_last_step_wall_seconds")), row["wall_time_ns"]),
                ("gmprof_last_step_gpu_seconds (ns)", ns(value(pts, "gmprof_last_step_gpu_seconds")), row["gpu_time_ns"]),
                ("gmprof_kernels", value(pts, "gmprof_kernels"), streamed["kernels"]),
                ("gmprof_otlp_push_failures", value(pts, "gmprof_otlp_push_failures") or 0, 0),
            ]
            for g in (g for g in streamed["aggregates"] if g["table"] == "range" and g["quantity"] == "gpu_time_ns"):
                # Every instance, those without a GPU time (missing) too.
                checks.append((f'gmprof_range_instances{{range="{g["key"]}"}}',
                               value(pts, "gmprof_range_instances", range=g["key"]), g["count"] + g.get("missing", 0)))
                got = value(pts, "gmprof_range_gpu_seconds", range=g["key"])
                checks.append((f'gmprof_range_gpu_seconds{{range="{g["key"]}"}} (ns)',
                               None if got is None else round(got * 1e9), g.get("total_ns")))
            wrong += [f"{w}: pushed {got}, outputs {want}" for w, got, want in checks if got != want]
            n_checks = len(checks)
        ok = not wrong and during
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'}  rank {rank}: {len(mine)} pushes, steps pushed {steps_seen[:1]}..{steps_seen[-1:]} "
              f"of {len(table)}; pushed while running: {during}; last push: "
              f"{n_checks - len(wrong) if mine else 0} of {n_checks if mine else 0} values equal the outputs")
        for w in wrong[:8]:
            print(f"      {w}")
    if not reports:
        print(f"FAIL  no report.json under {run_dir}")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
