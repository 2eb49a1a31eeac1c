#!/usr/bin/env python3
"""Checks the live metrics scraped during a run (scripts/check/scrape_live.py) against the
run's own steps table (report.json's streamed.steps_table), per rank (issue 45's acceptance:
step time per rank from the endpoint equals the run's steps table).

    check_live_scrapes.py RUN_DIR SCRAPES.jsonl

RUN_DIR holds one report.json per process: a directory per rank, named `HOST-RANK` as
gmprof run names them (or holding `rank<N>`), or RUN_DIR itself for a run of one process
(rank 0, or the only rank label scraped). Every scrape is matched to its rank by its `rank` label.
Checks, per rank, for every scrape:

- gmprof_last_step and gmprof_last_step_wall_seconds: the steps table has that step, with
  that wall time to the nanosecond (and gmprof_last_step_gpu_seconds its GPU time);
- gmprof_steps_total = N: the table's first N rows are the steps drained so far, so
  gmprof_step_wall_seconds_count and _sum equal the count and the sum of those rows' wall
  times, and the last step scraped is the N-th row's;
- scrapes never go back (steps_total never falls), and at least one was taken before the
  last step (scraped while the run went on).

Prints per rank how many scrapes matched and how far the last scrape was behind the run's
last step (the endpoint closes with the process: the final drain is in the files, not
necessarily scraped); exits 1 when a number disagrees.
"""

import glob
import json
import os
import re
import sys


def value(samples, name, **labels):
    got = [v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items())]
    return got[0] if got else None


def ns(seconds):
    return None if seconds is None else round(seconds * 1e9)


def rank_reports(run_dir):
    """{rank (str, None when a directory names none): report.json's `streamed`} of each
    process's report under RUN_DIR (directories named HOST-RANK by gmprof run, or holding
    rank<N>); None, said, when one is not a streamed run. Shared with check_otlp_pushes.py."""
    out = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "**", "report.json"), recursive=True)):
        rel = os.path.dirname(os.path.relpath(path, run_dir))
        m = re.search(r"rank(\d+)", rel) or re.search(r"-(\d+)$", rel)
        with open(path) as f:
            streamed = json.load(f).get("streamed")
        if not streamed:
            print(f"FAIL  {path}: not a streamed run (no steps table)")
            return None
        out[m.group(1) if m else None] = streamed
    return out


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    run_dir, scrapes_path = argv[1], argv[2]
    streamed_by_rank = rank_reports(run_dir)
    if streamed_by_rank is None:
        return 1
    tables = {rank: streamed["steps_table"] for rank, streamed in streamed_by_rank.items()}
    scrapes = [json.loads(line) for line in open(scrapes_path)]
    if None in tables:
        if len(tables) > 1:
            print(f"FAIL  {run_dir}: several reports, and one has no rank in its directory name")
            return 1
        ranks = {l.get("rank") for s in scrapes for _, l, _ in s["samples"]} - {None}
        tables = {(ranks.pop() if len(ranks) == 1 else "0"): tables[None]}
    bad = 0
    for rank, table in sorted(tables.items()):
        rows = {r["step"]: r for r in table}
        mine = [s for s in scrapes if any(l.get("rank", "0") == rank for _, l, _ in s["samples"])]
        matched, last_n, wrong = 0, 0, []
        for s in mine:
            smp = s["samples"]
            n = value(smp, "gmprof_steps_total")
            step = value(smp, "gmprof_last_step")
            if n is None or n == 0:
                continue
            n, step = int(n), int(step)
            if n < last_n:
                wrong.append(f"steps_total fell from {last_n} to {n}")
            last_n = n
            prefix = table[:n]
            row = rows.get(step)
            checks = [
                ("last step is the N-th row's", prefix[-1]["step"] if len(prefix) == n else None, step),
                ("last step wall ns", row and row["wall_time_ns"], ns(value(smp, "gmprof_last_step_wall_seconds"))),
                ("last step GPU ns", row and row["gpu_time_ns"], ns(value(smp, "gmprof_last_step_gpu_seconds"))),
                ("wall count", sum(1 for r in prefix if r.get("wall_time_ns") is not None),
                 int(value(smp, "gmprof_step_wall_seconds_count") or 0)),
            ]
            walls = sum(r["wall_time_ns"] for r in prefix if r.get("wall_time_ns") is not None)
            got_sum = value(smp, "gmprof_step_wall_seconds_sum")
            ok_sum = got_sum is not None and abs(got_sum * 1e9 - walls) < 0.5
            failed = [f"{w}: table {t}, scraped {g}" for w, t, g in checks if t != g]
            if not ok_sum:
                failed.append(f"wall sum: table {walls} ns, scraped {got_sum} s")
            if failed:
                wrong.append(f"scrape at steps_total {n}: " + "; ".join(failed))
            else:
                matched += 1
        during = any(0 < (value(s["samples"], "gmprof_steps_total") or 0) < len(table) for s in mine)
        status = "ok  " if matched and not wrong and during else "FAIL"
        bad += status == "FAIL"
        print(f"{status}  rank {rank}: {len(table)} steps in the table; {len(mine)} scrapes, {matched} with steps "
              f"matched to the ns; last scrape at step count {last_n} ({len(table) - last_n} behind the end); "
              f"scraped while running: {during}")
        for w in wrong[:5]:
            print(f"      {w}")
    if not tables:
        print(f"FAIL  no report.json under {run_dir}")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
