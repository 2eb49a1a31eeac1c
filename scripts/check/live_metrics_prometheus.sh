#!/usr/bin/env bash
# gmprof's live metrics under a real Prometheus (issue 45), on the CPU.
#
# Starts Prometheus (Debian's `prometheus` package, or $PROMETHEUS) scraping every second, on
# ports of this host's loopback that are free; runs examples/live_metrics.rs (a training loop
# through the capture path's recorded-data seam, its live metrics served at /metrics, RANK=0
# LOCAL_RANK=0 WORLD_SIZE=1 as torchrun sets them) for about 6 s; once it has written its
# outputs, scripts/check/check_live_metrics.py queries Prometheus's HTTP API and checks the
# step count, the last step, and every range group's instances and GPU and wall time against
# the run's report.json, exactly. Then the same check runs against a copy of report.json with
# one step and one nanosecond more, and must fail: a check that cannot fail checks nothing.
#
# Usage: scripts/check/live_metrics_prometheus.sh   (from anywhere; builds the example)
set -euo pipefail
cd "$(dirname "$0")/../.."
prometheus=${PROMETHEUS:-prometheus}
if ! command -v "$prometheus" >/dev/null; then
  echo "live_metrics_prometheus.sh: no $prometheus (apt-get install prometheus)" >&2
  exit 1
fi
cargo build -q --features bench-internals --example live_metrics
example=target/debug/examples/live_metrics

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
app_port=$(free_port)
prom_port=$(free_port)
cat > "$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gmprof
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ["127.0.0.1:$app_port"]
EOF
"$prometheus" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" > "$work/prometheus.log" 2>&1 &
pids+=($!)
prom="http://127.0.0.1:$prom_port"
python3 - "$prom" <<'EOF'
import sys, time, urllib.request
for _ in range(120):
    try:
        urllib.request.urlopen(sys.argv[1] + "/-/ready", timeout=1)
        sys.exit(0)
    except OSError:
        time.sleep(0.5)
sys.exit("Prometheus did not get ready in 60 s")
EOF
"$prometheus" --version 2>&1 | head -n1

RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 "$example" --port "$app_port" --out "$work/out" --steps 150 --step-ms 40 \
  --drain-every 10 --linger-secs 60 > "$work/example.log" 2>&1 &
pids+=($!)
if ! python3 scripts/check/check_live_metrics.py --prometheus "$prom" --out "$work/out" --rank 0 --timeout 60; then
  echo "--- example:" >&2; cat "$work/example.log" >&2
  echo "--- prometheus:" >&2; tail -n 20 "$work/prometheus.log" >&2
  exit 1
fi

# A wrong value must fail the check: one step and one nanosecond of a range group more.
mkdir "$work/wrong"
touch "$work/wrong/done"
python3 - "$work/out/report.json" "$work/wrong/report.json" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
s = report["streamed"]
s["steps"] += 1
group = next(g for g in s["aggregates"] if g["table"] == "range" and g["quantity"] == "gpu_time_ns")
group["total_ns"] += 1
json.dump(report, open(sys.argv[2], "w"))
EOF
if python3 scripts/check/check_live_metrics.py --prometheus "$prom" --out "$work/wrong" --rank 0 --timeout 3 \
  > "$work/wrong.log" 2>&1; then
  cat "$work/wrong.log" >&2
  echo "live_metrics_prometheus.sh: the check passed against a wrong report.json" >&2
  exit 1
fi
grep -c WRONG "$work/wrong.log" | sed 's/^/a wrong report.json: the check fails, disagreements: /'
grep WRONG "$work/wrong.log" | head -n 3
echo "live metrics under Prometheus: the scraped values equal the run's outputs"
