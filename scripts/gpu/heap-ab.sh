#!/usr/bin/env bash
# Issue 42: gmprof's own heap (mimalloc, feature own-heap) against the process's glibc heap,
# on two GPUs at once: the same long llm.c run (scripts/gpu/long-run.sh, MODE) on GPU 0 with
# .gpu/lib/libgmprof.so (the default build) and on GPU 1 with GLIBC_LIB (a build with
# `--no-default-features`), each with the per-drain memory census.
# Here: scripts/gpu-stage --no-tests --features gpu; cargo build --release --lib
# --no-default-features, then xz target/release/libgmprof.so into .gpu-glibc/libgmprof.so.xz. There, with .gpu/,
# .real/ and .gpu-glibc/ carried:
#   MODE=pm SECS=500 bash scripts/gpu/heap-ab.sh
set -u
cd "$(dirname "$0")/../.."
MODE=${MODE:-pm} SECS=${SECS:-500} END=${END:-term}
GLIBC_LIB=${GLIBC_LIB:-$PWD/.gpu-glibc/libgmprof.so}
# Carried xz-compressed (a GPU call carries 64 MiB in all).
[ -f "$GLIBC_LIB" ] || python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$GLIBC_LIB.xz" "$GLIBC_LIB"; chmod +x "$GLIBC_LIB"
# Logs under $OUT/heap-ab (the GPU machine's folder that comes back), else out/heap-ab.
dest=${OUT:-out}/heap-ab
mkdir -p "$dest"
export LOG_FILTER=${LOG_FILTER:-gmprof=info,gmprof::census=debug}
CUDA_VISIBLE_DEVICES=0 MODE=$MODE SECS=$SECS END=$END OUT=$dest/own RUNS=/tmp/heap-ab/own \
  bash scripts/gpu/long-run.sh > "$dest/own.log" 2>&1 &
a=$!
CUDA_VISIBLE_DEVICES=1 GPU_LIB=$GLIBC_LIB MODE=$MODE SECS=$SECS END=$END OUT=$dest/glibc RUNS=/tmp/heap-ab/glibc \
  bash scripts/gpu/long-run.sh > "$dest/glibc.log" 2>&1 &
b=$!
wait $a; wait $b
for side in own glibc; do
  echo "=================== $side"
  cat "$dest/$side.log"
  grep -h "gmprof::census" "$dest/$side"/*/stderr.txt 2>/dev/null | awk 'NR==1 || NR%20==0' | grep -oE "drain [0-9]+|mem\.[a-z_]+=[0-9]+" | paste -sd' ' | sed 's/drain /\ndrain /g'
done
