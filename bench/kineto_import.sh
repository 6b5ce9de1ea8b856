#!/usr/bin/env bash
# The Kineto import's scale benchmark (docs/kineto.md; the bar: a 1 GB profiler trace imports in
# <= 60 s with a peak RSS <= 1 GB, and the viewer opens the result within its 10 M-event bars).
# Makes the trace once with bench/kineto_big.py (nccl_data's steps repeated COPIES times; kept in
# $DPSCOPE_BENCH_DIR, default /tmp/dpscope-bench), then times `dpscope import` under
# /usr/bin/time -v and opens the run file with dpscope-view headless under xvfb-run, printing the
# load average first (results on a busy machine are not the bar's).
#   bench/kineto_import.sh [BUILD_DIR] [COPIES]
set -euo pipefail
build=${1:-build}
copies=${2:-116}
dir=${DPSCOPE_BENCH_DIR:-/tmp/dpscope-bench}
bin="$build/bin"
if [ ! -x "$bin/dpscope" ] || [ ! -x "$bin/dpscope-view" ]; then
  echo "kineto_import.sh: $bin/dpscope or $bin/dpscope-view is missing; build them first:" \
       "cmake --build $build --target dpscope dpscope-view" >&2
  exit 1
fi
mkdir -p "$dir"
trace="$dir/kineto-nccl_data-x$copies.json"
if [ ! -f "$trace" ]; then
  /usr/bin/python3 "$(dirname "$0")/kineto_big.py" "$trace" "$copies"
fi
echo "# trace $(du -h --apparent-size "$trace" | cut -f1) ($(stat -c %s "$trace") bytes)"
echo "# load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -v "$bin/dpscope" import "$trace" -o "$dir/kineto-x$copies.sqlite" 2>"$dir/time.txt"
grep -E "Elapsed|Maximum resident" "$dir/time.txt"
echo "# load $(cut -d' ' -f1-3 /proc/loadavg)"
xvfb-run -a "$bin/dpscope-view" "$dir/kineto-x$copies.sqlite" --screenshot "$dir/kineto.png" --frames 60 --zoom-sweep
