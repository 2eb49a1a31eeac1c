#!/usr/bin/env bash
# Several long llm.c runs at once, one per GPU (issue 42): each argument is
# GPU:MODE[:NAME=VALUE,...], run by scripts/gpu/long-run.sh with those variables set (e.g.
# 1:trace:GMPROF_STREAM_TRIM_EVERY=1). SECS and END apply to all. Each run's log, RSS table and
# stderr (the memory census, with LOG_FILTER) are copied flat into $OUT/long-par/ (the GPU
# machine's folder that comes back), named TAG-*, TAG = GPU-MODE.
#   SECS=500 LOG_FILTER=gmprof=info,gmprof::census=debug bash scripts/gpu/long-runs-par.sh 0:trace 1:per_range
set -u
cd "$(dirname "$0")/../.."
dest=${OUT:-out}/long-par
mkdir -p "$dest"
pids=()
for spec in "$@"; do
  IFS=: read -r gpu mode vars <<< "$spec"
  tag=$gpu-$mode
  ( [ -n "$vars" ] && { IFS=, read -ra kv <<< "$vars"; for a in "${kv[@]}"; do export "$a"; done; }
    CUDA_VISIBLE_DEVICES=$gpu MODE=$mode OUT=/tmp/long-par/$tag RUNS=/tmp/long-par-runs/$tag \
      bash scripts/gpu/long-run.sh > "$dest/$tag.log" 2>&1
    for f in /tmp/long-par/$tag/*/rss.txt /tmp/long-par/$tag/*/stderr.txt /tmp/long-par/$tag/*/report.txt; do
      [ -f "$f" ] && cp "$f" "$dest/$tag-$(basename "$f")"
    done ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for spec in "$@"; do
  IFS=: read -r gpu mode vars <<< "$spec"
  echo "=================== $gpu $mode ${vars:-}"
  grep -v "gmprof::census" "$dest/$gpu-$mode.log" | grep -E "t_s|^ +[0-9]+ +[0-9]+ |peak RSS|exit|step time|on disk|PASS|FAIL|drains:|warning|PM sampling|^gmprof|NVIDIA" | cut -c1-300
done
