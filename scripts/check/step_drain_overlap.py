#!/usr/bin/env python3
"""Step time against the streamed drains of a `gmprof run` of llm.c (scripts/gpu/long-run.sh).

  step_drain_overlap.py STDOUT STDERR [NATIVE_STDOUT]

STDOUT: llm.c's step lines, each prefixed with the time it was read (long-run.sh's stdout.txt);
STDERR: gmprof's log with the per-drain census (GMPROF_LOG=...,gmprof::census=debug), whose
lines carry the drain's end time, its length (ns.drain) and its time under the session's lock
(ns.locked). A step is [read time - its ms, read time]; it overlaps a drain when the two
intervals meet. Prints the step time's quantiles for steps that overlap a drain, that overlap
its locked part, and that overlap none, and the share of wall time the drains ran.
"""
import re
import statistics
import sys
from datetime import datetime

STEP = re.compile(r"^([0-9.]+) step +([0-9]+)/.*\| ([0-9.]+) ms \|")
CENSUS = re.compile(r"^(\S+Z)\s+DEBUG gmprof::census: drain \d+: (.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def steps(path):
    out = []
    for line in open(path, errors="replace"):
        m = STEP.search(line)
        if m:
            t, ms = float(m.group(1)), float(m.group(3))
            out.append((t - ms / 1e3, t, ms))
    return out[10:]  # llm.c's first steps warm up


def drains(path):
    out = []
    for line in open(path, errors="replace"):
        m = CENSUS.match(ANSI.sub("", line))
        if not m:
            continue
        end = datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
        kv = dict(p.split("=", 1) for p in m.group(2).split())
        # The census is logged at the drain's end, after the completed ranges' removal: its
        # start is end - ns.removal - ns.drain.
        start = end - (int(kv["ns.drain"]) + int(kv.get("ns.removal", 0))) / 1e9
        out.append((start, end, start + int(kv["ns.locked"]) / 1e9))
    return out


def q(values):
    if not values:
        return "no steps"
    v = sorted(values)
    pick = lambda p: v[min(len(v) - 1, int(p * len(v)))]
    return f"{len(v)} steps: median {pick(0.5):.2f} ms, p90 {pick(0.9):.2f}, p99 {pick(0.99):.2f}, mean {statistics.fmean(v):.2f}"


def main():
    s = steps(sys.argv[1])
    d = drains(sys.argv[2])
    if not s or not d:
        sys.exit(f"{len(s)} steps and {len(d)} drains found: nothing to compare")
    meet = lambda a0, a1, b0, b1: a0 < b1 and b0 < a1
    in_lock, in_drain, clear = [], [], []
    for s0, s1, ms in s:
        if any(meet(s0, s1, d0, lk) for d0, _, lk in d):
            in_lock.append(ms)
        elif any(meet(s0, s1, d0, d1) for d0, d1, _ in d):
            in_drain.append(ms)
        else:
            clear.append(ms)
    wall = s[-1][1] - s[0][0]
    busy = sum(min(d1, s[-1][1]) - max(d0, s[0][0]) for d0, d1, _ in d if d1 > s[0][0] and d0 < s[-1][1])
    print(f"drains: {len(d)}, running {100 * busy / wall:.1f} % of the {wall:.1f} s of steps")
    print(f"steps meeting a drain's locked part: {q(in_lock)}")
    print(f"steps meeting a drain (unlocked part only): {q(in_drain)}")
    print(f"steps meeting no drain: {q(clear)}")
    print(f"all steps: {q([ms for _, _, ms in s])}")
    if len(sys.argv) > 3:
        print(f"native: {q([ms for _, _, ms in steps(sys.argv[3])])}")


if __name__ == "__main__":
    main()
