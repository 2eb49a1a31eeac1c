#!/usr/bin/env bash
# gmprof.torch on the GPU machine, from the wheel: a 6-layer GPT (python/examples/torch_gpt.py)
# trains under gmprof.torch.profile in per_kernel and per_range modes; the kernels per step and
# per module-tree range are compared with torch.profiler's, the expected kernels are looked up
# in module ranges, the hooks' overhead is measured against emit_nvtx, and python/README.md's
# two examples run.
#
#   scripts/build-wheel                                    # here
#   mkdir -p STAGE && cp target/wheels/gmprof-*.whl STAGE/ && cp -r scripts python STAGE/
#   bash STAGE/scripts/gpu/torch-validate.sh [SECTION...]  # there; files into $OUT
#
# Sections (default all): modes (per_kernel and per_range against torch.profiler), nvtx (the
# NVTX backend under `gmprof run`, against torch.profiler), overhead, readme.
#
# The wheel goes into a venv over the system's PyTorch (--system-site-packages, --no-deps):
# nothing else is set, so the package finds its own libgmprof.so and CUDA by itself.
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-out/torch-validate}; mkdir -p "$out"
work=$(mktemp -d)
run() { echo; echo "\$ $*"; timeout "${T:-150}" "$@"; echo "[exit $?]"; }
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
unset GMPROF_LIBRARY PYTHONPATH
export PYTHONUNBUFFERED=1
# A venv over the Python that has torch (with a .pth to torch's site-packages when that Python
# is itself a venv); else pip --target; else the wheel unpacked (it is a zip).
torch_site=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
venv=$work/venv
if python3 -m venv --system-site-packages "$venv" 2>/dev/null &&
   { "$venv/bin/python" -c 'import torch' 2>/dev/null ||
     echo "$torch_site" > "$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')/torch-site.pth"; } &&
   "$venv/bin/python" -m pip install -q --no-deps --no-index --ignore-installed ./gmprof-*.whl; then
  echo "installed: pip install --no-deps into a venv over $torch_site"
  PY=$venv/bin/python GMPROF_BIN=$venv/bin/gmprof
elif PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-deps --no-index --target "$work/site" ./gmprof-*.whl; then
  echo "installed: pip install --no-deps --target $work/site"
  export PYTHONPATH=$work/site; PY=python3 GMPROF_BIN=$work/site/bin/gmprof
else
  python3 -m zipfile -e ./gmprof-*.whl "$work/site" && chmod +x "$work"/site/gmprof-*.data/scripts/gmprof
  echo "installed: the wheel unpacked into $work/site (no pip)"
  export PYTHONPATH=$work/site; PY=python3 GMPROF_BIN=$(ls "$work"/site/gmprof-*.data/scripts/gmprof)
fi
run "$PY" -c "import gmprof, torch; print('gmprof', gmprof.version(), gmprof.library_path()); print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"

G="$PY python/examples/torch_gpt.py"
has() { [ "$sections" = all ] || case " $sections " in *" $1 "*) true ;; *) false ;; esac; }
sections=${*:-all}
has modes || has nvtx && run $G torch --json "$out/torch.json"
if has modes; then
  T=200 run $G gmprof --mode per_kernel --out "$work/per_kernel" --json "$out/per_kernel.json"
  T=200 run $G gmprof --mode per_range --out "$work/per_range" --json "$out/per_range.json"
  run $G compare "$out/per_kernel.json" "$out/torch.json"
  run $G compare "$out/per_range.json" "$out/torch.json"
  run "$GMPROF_BIN" report "$work/per_range"
  cp "$work/per_range/ranges.csv" "$out/per_range-ranges.csv" 2>/dev/null
fi
if has nvtx; then
  # The NVTX backend under `gmprof run` (injection; process range scope by default): the
  # autograd thread's NVTX ranges nest in the main thread's step there too.
  T=200 run "$GMPROF_BIN" run --mode per_kernel -o "$work/nvtx" -- $G gmprof --backend nvtx
  run $G summarize "$work/nvtx" --mode "gmprof-run-nvtx" --json "$out/nvtx.json"
  run $G compare "$out/nvtx.json" "$out/torch.json"
fi
has overhead && run $G overhead --json "$out/overhead.json"

if has readme; then
  # python/README.md's examples, as written there (the first python block, and gmprof.torch's).
  "$PY" - "$work" <<'PY'
import re, sys
text = open("python/README.md").read()
blocks = re.findall(r"```python\n(.*?)```", text, re.S)
torch_block = next(b for b in blocks if "gmprof.torch.profile(" in b)
for name, code in (("readme_example.py", blocks[0]), ("readme_torch_example.py", torch_block)):
    with open(sys.argv[1] + "/" + name, "w") as f:
        f.write(code + "\nprint(report.top_ranges(6))\nprint('warnings:', report.warnings)\n")
PY
  (cd "$work" && T=120 run "$PY" readme_example.py && T=120 run "$PY" readme_torch_example.py)
fi
rm -rf "$work"
