#!/usr/bin/env bash
# Regenerates the committed bindings in src/sys/generated/ from the CUDA 13.0 headers that
# NVIDIA publishes on PyPI, pinned to exact releases so that the drift check is reproducible (nvidia-cuda-cupti, nvidia-cuda-runtime, and nvidia-cuda-crt for crt/host_defines.h).
#
#   scripts/regen-bindings.sh            rewrite src/sys/generated/
#   scripts/regen-bindings.sh --check    exit 1 if the committed files differ from a fresh run
#
# Needs libclang (Debian/Ubuntu: apt-get install libclang-dev), pip and unzip or python3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
check=0
[ "${1:-}" = --check ] && check=1

work=${GMPROF_HEADER_CACHE:-$root/target/cuda-headers}
include=$work/nvidia/cu13/include
if [ ! -f "$include/cupti_range_profiler.h" ] || [ ! -f "$include/cuda.h" ]; then
  mkdir -p "$work/wheels"
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_25_x86_64 --platform manylinux2014_x86_64 \
    --python-version 3.12 -d "$work/wheels" nvidia-cuda-cupti==13.0.85 nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88
  for whl in "$work"/wheels/*.whl; do
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$work"
  done
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# A separate target dir keeps this build from invalidating the normal one.
GMPROF_CUDA_INCLUDE=$include GMPROF_BINDINGS_OUT_DIR=$out \
  cargo build --quiet --lib --target-dir "$root/target/regen-bindings"

if [ $check = 1 ]; then
  status=0
  for f in cupti.rs driver.rs; do
    if ! diff -q "src/sys/generated/$f" "$out/$f" >/dev/null; then
      echo "bindings drift: src/sys/generated/$f differs from a fresh generation:" >&2
      diff -u "src/sys/generated/$f" "$out/$f" | head -40 >&2 || true
      status=1
    fi
  done
  [ $status = 0 ] && echo "bindings: committed src/sys/generated/ matches a fresh generation"
  exit $status
fi
cp "$out"/cupti.rs "$out"/driver.rs src/sys/generated/
echo "regenerated src/sys/generated/{cupti,driver}.rs from $include"
