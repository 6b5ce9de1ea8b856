#!/usr/bin/env bash
# The viewer's idle CPU (issue bar: <= 5 % of one core; Note [Quiet when idle]): opens a
# `dpscope synth` trace in a real window under xvfb-run, waits until loading and the background
# analysis are over, then reads the viewer's CPU time from /proc over SECONDS of no input.
# Prints one line: seconds of CPU, the window's share of one core. Usage:
# bench/viewer_idle.sh [BUILD_DIR] [EVENTS] [SECONDS]
set -euo pipefail
if [ -z "${DISPLAY:-}" ]; then
  exec xvfb-run -a -s "-screen 0 1600x1000x24" "$0" "$@"
fi
build=${1:-build}
events=${2:-1000000}
seconds=${3:-10}
dir=${DPSCOPE_BENCH_DIR:-/tmp/dpscope-bench}
bin="$build/bin"
if [ ! -x "$bin/dpscope-view" ] || [ ! -x "$bin/dpscope" ]; then
  echo "viewer_idle.sh: $bin/dpscope-view or $bin/dpscope is missing; build them first:" \
       "cmake --build $build --target dpscope dpscope-view" >&2
  exit 1
fi
mkdir -p "$dir"
trace="$dir/synth-$events-8.sqlite"
[ -f "$trace" ] || "$bin/dpscope" synth --events "$events" --ranks 8 --out "$trace"

"$bin/dpscope-view" "$trace" &
pid=$!
trap 'kill "$pid" 2> /dev/null || true' EXIT
tick=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
# Loaded and analysed once a second passes with (almost) no CPU; at most 120 s.
for _ in $(seq 120); do
  before=$(cpu); sleep 1; after=$(cpu)
  [ $((after - before)) -le $((tick / 20)) ] && break
done
before=$(cpu); sleep "$seconds"; after=$(cpu)
awk -v t=$((after - before)) -v hz="$tick" -v s="$seconds" \
  'BEGIN { printf "idle %d s: %.2f s of CPU, %.1f %% of one core\n", s, t / hz, 100 * t / hz / s }'
