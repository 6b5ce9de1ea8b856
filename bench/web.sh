#!/usr/bin/env bash
# The browser viewer's speed and size (docs/web.md; bars in bench/README.md): the .wasm's size,
# plain and gzipped; then, in headless chromium at 1280x800, five opens each of the demo's DDP run
# (recorded here once, 4 ranks, 150 steps) and of a 1 M-event, 8-rank `dpscope synth` trace, with
# the frame times of a 60-frame zoom. Needs scripts/setup --web and scripts/web.
#   bench/web.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
bin=build/bin
web=build-web
[ -f "$web/dpscope-view.wasm" ] || { echo "web.sh: no $web/dpscope-view.wasm: run scripts/web" >&2; exit 1; }
dir=${TMPDIR:-/tmp}/dpscope-bench
mkdir -p "$dir"
wasm_bytes=$(stat -c %s "$web/dpscope-view.wasm")
gzip_bytes=$(gzip -9 -c "$web/dpscope-view.wasm" | wc -c)
echo "web.sh: dpscope-view.wasm $((wasm_bytes / 1024)) KiB, gzipped $((gzip_bytes / 1024)) KiB"
demo="$dir/web-demo"
if [ ! -f "$demo/ddp/run.sqlite" ]; then
  "$bin/dpscope" demo --no-view --out "$demo" >/dev/null
fi
synth="$dir/synth-1000000-8.sqlite"
[ -f "$synth" ] || "$bin/dpscope" synth --events 1000000 --ranks 8 --out "$synth" >/dev/null
for trace in "$demo/ddp/run.sqlite" "$synth"; do
  echo "web.sh: $trace ($(($(stat -c %s "$trace") / 1048576)) MiB)"
  node bench/web.js "$web" "$trace" "$runs"
done
