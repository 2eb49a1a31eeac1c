#!/usr/bin/env bash
# Renders gmprof's HTML report of recorded runs in headless Chromium and fails unless the page
# draws every chart with no script error, no console message and no network request.
#
#   scripts/check-html.sh [--screenshot PNG] [REPORT.json ...]
#
# Default reports: docs/recorded/torch_train_per_kernel.json (a PyTorch training run recorded
# on an H200, see docs/recorded/README.md) and tests/golden/report.json. Each is turned into
# HTML with `gmprof report REPORT --skip-first 1 --html`, loaded from a file:// URL with every
# host name unresolvable, and checked three ways: <body data-render="ok"> (set by the page's
# script after the last chart), <body data-errors="0"> (the page counts window errors,
# unhandled rejections and console.error calls) and no CONSOLE line in Chromium's log.
# --screenshot writes a PNG of the first report's page. Needs Chromium (Debian: apt-get install
# chromium); .ci/run installs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

screenshot=
reports=()
while [ $# -gt 0 ]; do
  case $1 in
    --screenshot) screenshot=$2; shift 2 ;;
    *) reports+=("$1"); shift ;;
  esac
done
[ ${#reports[@]} -gt 0 ] || reports=(docs/recorded/torch_train_per_kernel.json tests/golden/report.json)

browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "check-html: no Chromium found (Debian/Ubuntu: apt-get install -y chromium)" >&2
  exit 1
fi
cargo build --quiet --bin gmprof
gmprof=$root/target/debug/gmprof
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Offline: no host name resolves and no proxy answers, so any request would fail and log.
offline=(--headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars
  --host-resolver-rules="MAP * ~NOTFOUND" --proxy-server=127.0.0.1:9 --virtual-time-budget=10000)

status=0
n=0
for report in "${reports[@]}"; do
  n=$((n + 1))
  page=$work/report-$n.html
  "$gmprof" report "$report" --skip-first 1 --html "$page" >/dev/null 2>"$work/gmprof-$n.txt" || {
    echo "check-html: FAIL $report: gmprof report failed:" >&2; cat "$work/gmprof-$n.txt" >&2; status=1; continue; }
  timeout 180 "$browser" "${offline[@]}" --enable-logging=stderr --v=0 --dump-dom "file://$page" \
    >"$work/dom-$n.html" 2>"$work/chromium-$n.txt" || true
  body=$(grep -o '<body data-render[^>]*>' "$work/dom-$n.html" | head -1 || true)
  consoles=$(grep 'CONSOLE' "$work/chromium-$n.txt" || true)
  if [[ $body != *'data-render="ok"'* || $body != *'data-errors="0"'* || -n $consoles ]]; then
    echo "check-html: FAIL $report: body is '${body:-missing}'" >&2
    [ -z "$consoles" ] || echo "$consoles" >&2
    status=1
  else
    echo "check-html: ok $report ($(wc -c <"$page") bytes of HTML: every chart drawn, no console message)"
  fi
  if [ -n "$screenshot" ] && [ $n = 1 ]; then
    timeout 180 "$browser" "${offline[@]}" --window-size=1400,4300 --screenshot="$work/shot.png" "file://$page" \
      >/dev/null 2>&1 || true
    if [ -s "$work/shot.png" ]; then
      cp "$work/shot.png" "$screenshot"
      echo "check-html: screenshot $screenshot"
    else
      echo "check-html: FAIL: no screenshot was written" >&2
      status=1
    fi
  fi
done
exit $status
