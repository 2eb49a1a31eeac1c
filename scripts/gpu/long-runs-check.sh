#!/usr/bin/env bash
# The consistency checks and `gmprof report` of the runs scripts/gpu/long-runs-par.sh made
# with CHECK=later, on the same (still warm) GPU machine: for each run under /tmp/long-par/,
# kernels in the parts = kernels streamed, aggregates = a recomputation from the parts, one
# steps row per step (scripts/check/long_run_check.py), and `gmprof report` reading the parts.
# Results are copied flat into $OUT/long-par/ as TAG-check.txt and TAG-report.txt.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
dest=${OUT:-out}/long-par
mkdir -p "$dest"
for logs in /tmp/long-par/*/*/; do
  tag=$(basename "$(dirname "$logs")")
  runs=/tmp/long-par-runs/$tag/$(basename "$logs")
  [ -d "$runs" ] || continue
  echo "=================== $tag ($runs)"
  python3 scripts/check/long_run_check.py "$runs" "$logs/stdout.txt" > "$dest/$tag-check.txt" 2>&1
  echo "long_run_check: exit $?"; cat "$dest/$tag-check.txt" | cut -c1-250
  "$G" report "$runs" > "$dest/$tag-report.txt" 2>&1
  echo "gmprof report: exit $?, $(wc -l < "$dest/$tag-report.txt") lines"; head -8 "$dest/$tag-report.txt" | cut -c1-250
done
