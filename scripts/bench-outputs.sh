#!/usr/bin/env bash
# Outputs at scale (BENCHMARKS.md, "Parquet outputs and merging hundreds of ranks"); no GPU.
#
#   scripts/bench-outputs.sh [WORKDIR]      (default: a temporary directory, removed after)
#
# 1. One synthetic rank of 1 000 000 kernel rows: kernels.csv against kernels.parquet, write
#    and read-back time in Rust and size (examples/outputs_at_scale.rs table), then load time
#    in Python when pandas and pyarrow are installed (pandas.read_csv against
#    pyarrow.parquet.read_table and pandas.read_parquet).
# 2. 512 synthetic rank directories of 200 000 kernels and 1 000 steps each
#    (examples/outputs_at_scale.rs ranks), then `gmprof merge` of them under /usr/bin/time -v:
#    wall time and peak memory (maximum resident set size).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
[ -n "${1:-}" ] || trap 'rm -rf "$work"' EXIT
python=${PYTHON:-python3}
target=${CARGO_TARGET_DIR:-target}

cargo build --release --example outputs_at_scale --bin gmprof
echo "== 1. 1 000 000 kernel rows: CSV against Parquet"
"$target/release/examples/outputs_at_scale" table "$work/table" --kernels 1000000
if "$python" -c 'import pandas, pyarrow' 2>/dev/null; then
  "$python" - "$work/table" <<'PY'
import sys, time
import pandas, pyarrow, pyarrow.parquet as pq
d = sys.argv[1]
def best(f, n=3):
    times = []
    for _ in range(n):
        t = time.perf_counter(); out = f(); times.append(time.perf_counter() - t)
    return min(times), out
t_csv, df = best(lambda: pandas.read_csv(d + "/kernels.csv", comment="#"))
t_arrow, table = best(lambda: pq.read_table(d + "/kernels.parquet"))
t_pd, df2 = best(lambda: pandas.read_parquet(d + "/kernels.parquet"))
assert len(df) == len(df2) == table.num_rows == 1_000_000
print("| load, Python (best of 3) | pandas.read_csv %.2f s | pandas.read_parquet %.2f s; pyarrow.parquet.read_table %.2f s |"
      % (t_csv, t_pd, t_arrow))
try:
    import polars
    t_pl_csv, _ = best(lambda: polars.read_csv(d + "/kernels.csv", comment_prefix="#", infer_schema_length=10000))
    t_pl, _ = best(lambda: polars.read_parquet(d + "/kernels.parquet"))
    print("| load, Polars (best of 3) | polars.read_csv %.2f s | polars.read_parquet %.2f s |" % (t_pl_csv, t_pl))
    extra = ", polars %s" % polars.__version__
except ImportError:
    extra = ""
print("(python %s, pandas %s, pyarrow %s%s)" % (sys.version.split()[0], pandas.__version__, pyarrow.__version__, extra))
PY
fi
echo "== 2. gmprof merge of 512 ranks x 200 000 kernels"
"$target/release/examples/outputs_at_scale" ranks "$work/ranks" --ranks 512 --kernels 200000 --steps 1000
du -sh "$work/ranks"
/usr/bin/time -v "$target/release/gmprof" merge "$work/ranks" > "$work/merge.out" 2> "$work/merge.time" || { cat "$work/merge.time"; exit 1; }
head -n 7 "$work/merge.out"
sed -n '/^kernel /,$p' "$work/merge.out" | head -n 22
grep -E 'gmprof:|Elapsed \(wall clock\)|Maximum resident set size' "$work/merge.time"
