#!/usr/bin/env bash
# Renders gmprof's HTML report of recorded runs in headless Chromium and fails unless the page
# draws every chart with no script error, no console message and no network request.
#
#   scripts/check-html.sh [--screenshot PNG] [REPORT.json ...]
#
# Default reports: docs/recorded/nanogpt_per_kernel.json.zst (nanoGPT, 4803 kernels: more
# timeline items than ECharts draws in one go by default) and
# docs/recorded/torch_train_per_kernel.json (PyTorch training runs recorded on an H200, see
# docs/recorded/README.md), tests/golden/report.json and a process that used
# two GPUs (tests/data/devices/pipeline_per_kernel.json.zst) and a streamed run's report
# (tests/data/streamed/rank1/report.json: its steps chart and aggregate tables) and a per_kernel run
# in rotation (tests/data/rotation/report.json, from the CPU harness: its typical-step tables). Each is turned into
# HTML with `gmprof report REPORT --skip-first 1 --html`, loaded from a file:// URL with every
# host name unresolvable, and checked three ways: <body data-render="ok"> (set by the page's
# script after the last chart), <body data-errors="0"> (the page counts window errors,
# unhandled rejections and console.error calls) and no CONSOLE line in Chromium's log.
# --screenshot writes a PNG of the first report's page. The diff page (`gmprof diff BASE NEW
# --html`) is checked the same way, for each --diff BASE NEW pair (default: the recorded
# torch_train run against tests/golden/report.json); --diff-screenshot PNG writes the first.
# Needs Chromium (Debian: apt-get install chromium); .ci/run installs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

screenshot=
diff_screenshot=
reports=()
diffs=()
while [ $# -gt 0 ]; do
  case $1 in
    --screenshot) screenshot=$2; shift 2 ;;
    --diff-screenshot) diff_screenshot=$2; shift 2 ;;
    --diff) diffs+=("$2" "$3"); shift 3 ;;
    *) reports+=("$1"); shift ;;
  esac
done
[ ${#reports[@]} -gt 0 ] || reports=(docs/recorded/nanogpt_per_kernel.json.zst docs/recorded/torch_train_per_kernel.json tests/golden/report.json
  tests/data/devices/pipeline_per_kernel.json.zst tests/data/streamed/rank1/report.json tests/data/rotation/report.json)
[ ${#diffs[@]} -gt 0 ] || diffs=(docs/recorded/torch_train_per_kernel.json tests/golden/report.json)

browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "check-html: no Chromium found (Debian/Ubuntu: apt-get install -y chromium)" >&2
  exit 1
fi
cargo build --quiet --bin gmprof
gmprof=${CARGO_TARGET_DIR:-$root/target}/debug/gmprof
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Offline: no host name resolves and no proxy answers, so any request would fail and log.
# A profile of its own, so that another Chromium running on the machine (which would own the
# default profile and take the page over) cannot hang or fail the check.
offline=(--headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars --user-data-dir="$work/profile"
  --host-resolver-rules="MAP * ~NOTFOUND" --proxy-server=127.0.0.1:9 --virtual-time-budget=10000)

# check PAGE LABEL SCREENSHOT: renders PAGE and checks its health; SCREENSHOT (may be empty) gets a PNG.
check() {
  local page=$1 label=$2 shot=$3 m=$4
  timeout 180 "$browser" "${offline[@]}" --enable-logging=stderr --v=0 --dump-dom "file://$page" \
    >"$work/dom-$m.html" 2>"$work/chromium-$m.txt" || true
  local body consoles
  body=$(grep -o '<body data-render[^>]*>' "$work/dom-$m.html" | head -1 || true)
  consoles=$(grep 'CONSOLE' "$work/chromium-$m.txt" || true)
  if [[ $body != *'data-render="ok"'* || $body != *'data-errors="0"'* || -n $consoles ]]; then
    echo "check-html: FAIL $label: body is '${body:-missing}'" >&2
    [ -z "$consoles" ] || echo "$consoles" >&2
    status=1
  else
    echo "check-html: ok $label ($(wc -c <"$page") bytes of HTML: every chart drawn, no console message)"
  fi
  if [ -n "$shot" ]; then
    timeout 180 "$browser" "${offline[@]}" --window-size=1400,4300 --screenshot="$work/shot.png" "file://$page" \
      >/dev/null 2>&1 || true
    if [ -s "$work/shot.png" ]; then
      cp "$work/shot.png" "$shot"
      echo "check-html: screenshot $shot"
    else
      echo "check-html: FAIL: no screenshot was written" >&2
      status=1
    fi
    rm -f "$work/shot.png"
  fi
}

status=0
n=0
for report in "${reports[@]}"; do
  n=$((n + 1))
  page=$work/report-$n.html
  "$gmprof" report "$report" --skip-first 1 --html "$page" >/dev/null 2>"$work/gmprof-$n.txt" || {
    echo "check-html: FAIL $report: gmprof report failed:" >&2; cat "$work/gmprof-$n.txt" >&2; status=1; continue; }
  shot=
  [ $n = 1 ] && shot=$screenshot
  check "$page" "$report" "$shot" "r$n"
done
for ((i = 0; i < ${#diffs[@]}; i += 2)); do
  base=${diffs[i]} new=${diffs[i + 1]}
  page=$work/diff-$i.html
  "$gmprof" diff "$base" "$new" --skip-first 1 --html "$page" >/dev/null 2>"$work/gmprof-diff-$i.txt" || {
    echo "check-html: FAIL diff $base $new: gmprof diff failed:" >&2; cat "$work/gmprof-diff-$i.txt" >&2; status=1; continue; }
  shot=
  [ $i = 0 ] && shot=$diff_screenshot
  check "$page" "diff $base $new" "$shot" "d$i"
done
exit $status
