#!/usr/bin/env bash
# Regenerates docs/html-report.png, the README's picture of the HTML report, from the recorded
# run docs/recorded/nanogpt_per_kernel.json.zst (nanoGPT's train.py, GPT-2 124M shape, per_kernel
# with DRAM bytes and warp instructions on an H200; docs/recorded/README.md says how it was
# recorded). It first checks that the run is clean, since the picture is the project's
# showcase: 0 flagged kernel rows, 0 warnings, no dropped records; then renders the page in
# headless Chromium (scripts/check-html.sh, which also fails on any script error).
#
#   scripts/showcase.sh [REPORT] [PNG]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
report=${1:-docs/recorded/nanogpt_per_kernel.json.zst}
png=${2:-docs/html-report.png}
cargo build --quiet --bin gmprof
gmprof=${CARGO_TARGET_DIR:-$root/target}/debug/gmprof
summary=$("$gmprof" report "$report" --skip-first 1)
echo "$summary" | sed -n 1,3p
header=$(echo "$summary" | grep -m1 '^dropped counter ranges:')
for want in "dropped counter ranges: 0" "dropped activity records: 0" "flagged kernel rows: 0" "orphan counter ranges: 0" "warnings: 0"; do
  if [[ $header != *"$want"* ]]; then
    echo "showcase: $report is not a clean run ($header): the README's picture must show none, or explain each" >&2
    exit 1
  fi
done
scripts/check-html.sh --screenshot "$png" "$report"
