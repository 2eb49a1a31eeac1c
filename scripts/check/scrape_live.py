#!/usr/bin/env python3
"""Scrapes gmprof's live metrics endpoints while a run goes on, as Prometheus would, and
keeps every scrape for scripts/check/check_live_scrapes.py (issue 45: a scrape during a GPU
run against the run's own steps table).

    scrape_live.py --ports 9400,9401 --interval 1 --out SCRAPES.jsonl [--until FILE] [--timeout S]

Each scrape of each port is one JSON line: the wall time it was taken (Unix s), the port,
and the `gmprof_*` samples of the text exposition as [name, labels, value]. It stops when
FILE exists (the run's end) and every port has stopped answering, or after --timeout
seconds. Prints how many scrapes answered per port. Standard library only.
"""

import argparse
import json
import os
import re
import sys
import time
import urllib.request

SAMPLE = re.compile(r'^(gmprof_[a-zA-Z0-9_]+)(\{[^}]*\})? (\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """The gmprof_ samples of a Prometheus text exposition."""
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            labels = dict(LABEL.findall(m.group(2) or ""))
            out.append([m.group(1), labels, float(m.group(3))])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ports", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--until", help="stop once this file exists and no port answers")
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    ports = [int(p) for p in a.ports.split(",")]
    answered = {p: 0 for p in ports}
    start = time.monotonic()
    with open(a.out, "w") as out:
        while time.monotonic() - start < a.timeout:
            t0 = time.monotonic()
            alive = 0
            for port in ports:
                try:
                    with urllib.request.urlopen(f"http://{a.host}:{port}/metrics", timeout=2) as r:
                        text = r.read().decode()
                except OSError:
                    continue
                alive += 1
                answered[port] += 1
                out.write(json.dumps({"t": time.time(), "port": port, "samples": parse(text)}) + "\n")
                out.flush()
            if a.until and os.path.exists(a.until) and alive == 0:
                break
            time.sleep(max(0.0, a.interval - (time.monotonic() - t0)))
    print("scrapes answered: " + ", ".join(f"port {p}: {n}" for p, n in answered.items()))
    return 0 if all(answered.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
