#!/usr/bin/env python3
"""Step-time statistics of training logs, side by side: llm.c (`| 14.12 ms |`) and nanoGPT
(`iter 12: loss ..., time 31.20ms`) lines. The first SKIP steps (default 10) are left out.

    step_times.py [--skip N] NATIVE_LOG OTHER_LOG...

Prints per log: steps, median, p90, p99, max (ms) and the median against the first log's.
"""
import re
import sys

PATTERNS = [re.compile(r"\| ([0-9.]+) ms \|"), re.compile(r"^iter \d+: .*time ([0-9.]+)ms")]


def times(path):
    out = []
    for line in open(path, errors="replace"):
        for p in PATTERNS:
            m = p.search(line)
            if m:
                out.append(float(m.group(1)))
                break
    return out


def main(argv):
    skip = 10
    if len(argv) > 2 and argv[1] == "--skip":
        skip = int(argv[2])
        argv = argv[:1] + argv[3:]
    base = None
    for path in argv[1:]:
        t = sorted(times(path)[skip:])
        if not t:
            print(f"{path}: no step lines")
            continue
        q = lambda p: t[min(len(t) - 1, int(p * len(t)))]
        med = q(0.5)
        base = base or med
        print(f"{path}: {len(t)} steps, median {med:.3f} ms ({med / base:.3f}x), p90 {q(0.9):.3f}, "
              f"p99 {q(0.99):.3f}, max {t[-1]:.3f}")


if __name__ == "__main__":
    main(sys.argv)
