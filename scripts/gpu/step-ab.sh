#!/usr/bin/env bash
# llm.c's step time under several setups, interleaved round by round on one GPU (an A/B of
# builds or settings): each argument is NAME or NAME:VAR=VALUE,... where NAME native runs the
# program alone, nsys under Nsight Systems (CUDA and NVTX traced), and any other name under
# `gmprof run --mode trace` with those variables set (GPU_LIB=PATH injects another
# libgmprof.so, scripts/gpu/env.sh). STEPS steps a run (default 1500), ROUNDS rounds
# (default 2). Prints each run's median, p90 and p99 step time against the first native run
# (scripts/check/step_times.py) and every gmprof run's drain line. Logs go to /tmp/step-ab/;
# one summary (step-ab.log) and one archive of the logs (step-ab.tgz) to $OUT.
#   ROUNDS=3 bash scripts/gpu/step-ab.sh native nsys new old:GPU_LIB=/path/libgmprof.so
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu/env.sh
logs=/tmp/step-ab; rm -rf "$logs"; mkdir -p "$logs"
dest=${OUT:-out}; mkdir -p "$dest"
steps=${STEPS:-1500}
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
LLMC=("$R/llmc/train_gpt2cu" -i "$R/llmc/data/train.bin" -j "$R/llmc/data/val.bin" -e d12 -b 4 -t 1024 -v 100000
  -s 100000 -x "$steps")
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
echo "STEPS=$steps ROUNDS=${ROUNDS:-2} setups: $*"
files=()
for i in $(seq 1 "${ROUNDS:-2}"); do
  for spec in "$@"; do
    IFS=: read -r name vars <<< "$spec"
    f=$logs/$name$i.txt
    (
      cd "$R/llmc"
      [ -n "$vars" ] && { IFS=, read -ra kv <<< "$vars"; for a in "${kv[@]}"; do export "$a"; done; }
      export GMPROF_LIBRARY=${GPU_LIB:-$GMPROF_LIBRARY}
      case $name in
        native) timeout 300 "${LLMC[@]}" ;;
        nsys) timeout 300 "$NSYS" profile -t cuda,nvtx -s none --cpuctxsw=none -f true -o "/tmp/step-ab-nsys$i" "${LLMC[@]}" ;;
        *) rm -rf "/tmp/step-ab-$name$i"; timeout 300 "$G" run --mode trace -o "/tmp/step-ab-$name$i" -- "${LLMC[@]}" ;;
      esac
    ) > "$f" 2>&1
    echo "$name round $i: exit $?"
    files+=("$f")
  done
done
first=$(printf '%s\n' "${files[@]}" | grep -m1 '/native1.txt$' || echo "${files[0]}")
python3 scripts/check/step_times.py "$first" "${files[@]}"
grep -H "drains:" "${files[@]}" | sed "s|$logs/||" | cut -c1-250
} 2>&1 | tee "$dest/step-ab.log"
tar czf "$dest/step-ab.tgz" -C "$logs" .
