#!/usr/bin/env python3
"""Summarizes bench/cupti_floor output: per configuration, the time each launch adds.

    python3 scripts/check/floor_stats.py LOG [LOG...]

Reads every `cupti_floor config=... kernels=N ... unprofiled_ms=U profiled_ms=P ratio=R` line
(a configuration renamed by the caller, e.g. gmprof-before, keeps its own name) and prints,
per configuration, the added time per launch, (P - U) / N, and the ratio P / U, as the median
and range over its repeats. The first repeat after each start of a configuration (a
process's first timed run of it) is shown apart: it carries one-time costs, which a long
program does not see per launch.
"""
import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(
    r"cupti_floor config=(?P<config>\S+) launch=\S+ kernels=(?P<n>\d+) elements=\d+ "
    r"unprofiled_ms=(?P<u>[\d.]+) profiled_ms=(?P<p>[\d.]+) ratio=(?P<r>[\d.]+)"
)


def main(paths):
    steady = defaultdict(list)
    first = defaultdict(list)
    last_config = None
    for path in paths:
        with open(path) as f:
            for line in f:
                m = LINE.search(line)
                if not m:
                    last_config = None
                    continue
                config, n = m["config"], int(m["n"])
                added_us = (float(m["p"]) - float(m["u"])) * 1000.0 / n
                row = (added_us, float(m["r"]))
                (steady if config == last_config else first)[config].append(row)
                last_config = config
    if not steady and not first:
        sys.exit("no cupti_floor lines found")
    print(f"{'configuration':<22} {'runs':>4} {'added µs/launch: median':>24} {'range':>16} {'ratio: median':>14} {'range':>14} | first runs: µs/launch")
    for config in sorted(set(steady) | set(first)):
        rows = steady.get(config, [])
        head = ", ".join(f"{a:.2f}" for a, _ in first.get(config, []))
        if rows:
            added = [a for a, _ in rows]
            ratio = [r for _, r in rows]
            print(
                f"{config:<22} {len(rows):>4} {statistics.median(added):>24.3f} "
                f"{min(added):>7.2f}–{max(added):<7.2f} {statistics.median(ratio):>14.3f} "
                f"{min(ratio):>6.3f}–{max(ratio):<6.3f} | {head}"
            )
        else:
            print(f"{config:<22} {0:>4} {'':>24} {'':>16} {'':>14} {'':>14} | {head}")


if __name__ == "__main__":
    main(sys.argv[1:])
