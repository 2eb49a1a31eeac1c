#!/usr/bin/env bash
# Runs `gmprof report OUT --figures DIR` on recorded reports with Chromium (the HTML report's
# own page draws each figure, #figures) and fails unless every expected figure was written as
# SVG, PNG and CSV, the SVG holds its chart and the PNG is a drawn PNG of its size
# (scripts/check/check_figures.py), the command exits 0 (a page script error or a missing
# chart is an error of the command) and the browser's console stayed empty.
#
#   scripts/check/check-figures.sh [--keep DIR]
#
# Reports: docs/recorded/torch_train_per_kernel.json (per_kernel on an H200: GPU time per range
# group, DRAM bandwidth of range groups and kernels, the instruction roofline),
# tests/data/streamed/rank1 (a streamed run: the step breakdown), a process on two GPUs
# (tests/data/devices/pipeline_per_kernel.json.zst: a bar segment per GPU) and llm.c on an H100
# with PC sampling (tests/data/pc, its capture folded into its report by
# `cargo run --example pc_attach`: the stall mix). --keep DIR keeps the figures in DIR.
# Needs Chromium (Debian: apt-get install chromium; GMPROF_CHROMIUM names another); .ci/run
# installs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

keep=
while [ $# -gt 0 ]; do
  case $1 in
    --keep) keep=$2; shift 2 ;;
    *) echo "usage: $0 [--keep DIR]" >&2; exit 2 ;;
  esac
done

browser=${GMPROF_CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [ -z "$browser" ]; then
  echo "check-figures: no Chromium found (Debian/Ubuntu: apt-get install -y chromium)" >&2
  exit 1
fi
cargo build --quiet --bin gmprof --example pc_attach
target=${CARGO_TARGET_DIR:-$root/target}/debug
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${keep:-$work/figures}
mkdir -p "$out" "$work/pc"
"$target/examples/pc_attach" tests/data/pc/h100_llmc_3steps_report.json.zst \
  tests/data/pc/h100_llmc_3steps_pc_capture.json.zst "$work/pc/report.json"

status=0
n=0
# check REPORT EXPECTED-FIGURES
check() {
  local report=$1 expect=$2
  n=$((n + 1))
  local name
  name=$(basename "$report")
  local dir=$out/$n-${name%%.*}
  rm -rf "$dir"
  if ! GMPROF_CHROMIUM=$browser "$target/gmprof" report "$report" --figures "$dir" >/dev/null 2>"$work/log-$n"; then
    echo "check-figures: FAIL $report: gmprof report --figures failed:" >&2
    cat "$work/log-$n" >&2
    status=1
    return
  fi
  if ! grep -q "drawn by the HTML report's page" "$work/log-$n" || grep -q "console" "$work/log-$n"; then
    echo "check-figures: FAIL $report: not drawn by the page, or the browser's console was not empty:" >&2
    cat "$work/log-$n" >&2
    status=1
    return
  fi
  python3 scripts/check/check_figures.py "$dir" --expect "$expect" --report "$report" || status=1
}

check docs/recorded/torch_train_per_kernel.json range_time,dram_bandwidth,dram_bandwidth_kernels,roofline
check tests/data/streamed/rank1 steps
check tests/data/devices/pipeline_per_kernel.json.zst range_time,dram_bandwidth,dram_bandwidth_kernels
check "$work/pc/report.json" range_time,stall_mix
[ -z "$keep" ] || echo "check-figures: the figures are in $keep"
exit $status
