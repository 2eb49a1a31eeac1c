#!/usr/bin/env bash
# Builds gmprof's fuzz targets and runs them, one after another, each from its seeds
# (fuzz/seeds/, kept in the repository) and its growing corpus (fuzz/corpus/, not kept).
#
#   fuzz/run.sh [--seconds N] [--runs N] [--log DIR] [--bin DIR] [TARGET...]
#
# --seconds N  stop each target after N seconds (default 30: CI's short pass);
# --runs N     or after N executions, whichever comes first;
# --log DIR    keep each target's libFuzzer output in DIR/TARGET.log;
# --bin DIR    run the targets built into DIR (copies of fuzz/target/<host>/release/TARGET)
#              instead of building: a campaign of hours is not changed by a rebuild meanwhile.
# Without TARGETs every target runs. Ends with a line per target: executions, seconds,
# executions per second, and ok or the crash (the input is saved in fuzz/artifacts/TARGET/).
# Exits non-zero when any target crashed, hung (more than 10 s on one input) or allocated
# without bound (gmprof_fuzz::alloc_limit aborts; libFuzzer's -rss_limit_mb backs it up).
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --version 0.13.1 --locked`); stable Rust is
# enough: --sanitizer none builds with libFuzzer's coverage instrumentation only.
set -euo pipefail

seconds=30
runs=-1
log=""
bin=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --log) mkdir -p "$2"; log=$(cd "$2" && pwd); shift 2 ;;
    --bin) bin=$(cd "$2" && pwd); shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
cd "$(dirname "$0")"
all=(ptx_parse ptx_inject image elf_object probe_spec env control report_json parquet trace_check)
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

if [ -z "$bin" ]; then
  cargo fuzz build --sanitizer none
  bin=target/$(rustc -vV | sed -n 's/^host: //p')/release
fi

seeds_of() {
  case "$1" in
    ptx_parse|ptx_inject) echo seeds/ptx ;;
    *) echo "seeds/$1" ;;
  esac
}
dict_of() {
  case "$1" in
    ptx_parse|ptx_inject) echo dicts/ptx.dict ;;
    env) echo dicts/env.dict ;;
    control) echo dicts/control.dict ;;
    *) echo "" ;;
  esac
}

summary=()
failed=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  dict=$(dict_of "$t")
  out=$(mktemp)
  start=$(date +%s)
  set +e
  # The binary `cargo fuzz run` would start, started directly: what runs is what was built
  # above, even if the sources change meanwhile.
  "$bin/$t" -artifact_prefix="artifacts/$t/" -max_total_time="$seconds" -runs="$runs" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 ${dict:+-dict=$dict} "corpus/$t" "$(seeds_of "$t")" >"$out" 2>&1
  rc=$?
  set -e
  wall=$(( $(date +%s) - start ))
  [ -n "$log" ] && cp "$out" "$log/$t.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -n1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out" | tail -n1)
  if [ "$rc" -eq 0 ]; then
    result=ok
  else
    failed=1
    result="FAILED (exit $rc): $(grep -m1 -E 'panicked at|==gmprof-fuzz==|ERROR: libFuzzer' "$out" || echo 'see the log')"
    # What went wrong and where the input is.
    grep -E -A2 'panicked at|==gmprof-fuzz==|ERROR: libFuzzer' "$out" | head -n 12
    grep -E 'Test unit written to|^SUMMARY' "$out" || true
    echo "reproduce: (cd fuzz && cargo fuzz run --sanitizer none $t artifacts/$t/<crash file>)"
  fi
  summary+=("$(printf '%-12s %12s execs %6ss %8s exec/s  %s' "$t" "${execs:-?}" "$wall" "${rate:-?}" "$result")")
  rm -f "$out"
done
printf '%s\n' "${summary[@]}"
exit $failed
