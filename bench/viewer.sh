#!/usr/bin/env bash
# The viewer benchmark (docs/design.md's bar: a 10 M-event trace opens in <= 1 s, frames take
# <= 16 ms at any zoom, and the viewer's peak resident memory, the JSON line's peak_resident_mb,
# stays <= 0.8 GB). Makes an 8-rank synthetic trace with `dpscope synth` (once; kept in
# $DPSCOPE_BENCH_DIR, default /tmp/dpscope-bench), then runs dpscope-view headless under xvfb-run
# with Mesa's software renderer: a zoom sweep from the whole run to one bucket, several times,
# printing each run's JSON line after a "# load" line with the machine's load average (results
# on a busy machine are not the bar's). Usage: bench/viewer.sh [BUILD_DIR] [EVENTS] [RUNS]
set -euo pipefail
build=${1:-build}
events=${2:-10000000}
runs=${3:-3}
dir=${DPSCOPE_BENCH_DIR:-/tmp/dpscope-bench}
bin="$build/bin"
if [ ! -x "$bin/dpscope-view" ] || [ ! -x "$bin/dpscope" ]; then
  echo "viewer.sh: $bin/dpscope-view or $bin/dpscope is missing; build them first:" \
       "cmake --build $build --target dpscope dpscope-view" >&2
  exit 1
fi
mkdir -p "$dir"
trace="$dir/synth-$events-8.sqlite"
if [ ! -f "$trace" ]; then
  "$bin/dpscope" synth --events "$events" --ranks 8 --out "$trace"
fi
for run in $(seq "$runs"); do
  echo "# load $(cut -d' ' -f1-3 /proc/loadavg)"
  xvfb-run -a "$bin/dpscope-view" "$trace" --screenshot "$dir/viewer-$run.png" --frames 120 --zoom-sweep
done
