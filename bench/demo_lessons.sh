#!/usr/bin/env bash
# The demo's lessons, run after run: runs `dpscope demo` RUNS times (screenshots, no window) on the
# idle machine, beside two busy loops, or beside a build, and prints a Markdown row a run with
# Lesson 1's and Lesson 2's figures as the demo printed them (bench/README.md, "The demo's lessons").
#   bench/demo_lessons.sh [--bin DIR] [--runs N] [--load idle|busy|build:BUILD_DIR] [-- DEMO ARGS...]
# build:BUILD_DIR cleans and rebuilds dpscope_analysis and dpscope_trace in BUILD_DIR (configured
# beforehand, e.g. cmake -S . -B /tmp/loadbuild -G Ninja) over and over while the demos run.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build/bin"
runs=5
load=idle
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: bench/demo_lessons.sh [--bin DIR] [--runs N] [--load idle|busy|build:BUILD_DIR] [-- DEMO ARGS...] (got '$1')" >&2; exit 2 ;;
  esac
done
[[ -x "$bin/dpscope" ]] || { echo "demo_lessons.sh: no $bin/dpscope; build it first (cmake --build build --target dpscope dpscope-view)" >&2; exit 1; }

out="$(mktemp -d)"
loaders=()
stop_load() {
  # Each loader by its own process id (a build's ninja and compilers are in its process group).
  for pid in "${loaders[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
  for pid in "${loaders[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$out"
}
trap stop_load EXIT
set -m  # each background job its own process group, so that a build stops whole
case "$load" in
  idle) ;;
  busy) for _ in 1 2; do sh -c 'while :; do :; done' & loaders+=("$!"); done ;;
  build:*)
    dir="${load#build:}"
    [[ -f "$dir/build.ninja" ]] || { echo "demo_lessons.sh: $dir is not a configured Ninja build (cmake -S $root -B $dir -G Ninja)" >&2; exit 1; }
    (while :; do ninja -C "$dir" -t clean > /dev/null; CCACHE_DISABLE=1 ninja -C "$dir" -j2 dpscope_analysis dpscope_trace > /dev/null || exit 1; done) &
    loaders+=("$!") ;;
  *) echo "demo_lessons.sh: --load idle, busy or build:BUILD_DIR (got '$load')" >&2; exit 2 ;;
esac
set +m

echo "| load | run | Lesson 1: hidden | communication a step | exposed | buckets | Lesson 2: FSDP's peak / DDP's | FSDP's step / DDP's | DDP cluster step | accuracy | wall |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for run in $(seq 1 "$runs"); do
  start=$(date +%s)
  env -u DISPLAY -u WAYLAND_DISPLAY "$bin/dpscope" demo --no-view --out "$out/demo" "$@" > "$out/demo.log" 2>&1 ||
    { cat "$out/demo.log" >&2; exit 1; }
  wall=$(( $(date +%s) - start ))
  # "  59 % of the 2.82 ms of communication a step is hidden ... (the other 1.14 ms are exposed)."
  lesson1=$(grep -A2 '^Lesson 1' "$out/demo.log" | tr '\n' ' ')
  buckets=$(sed -n 's/^Lesson 1, DDP overlaps: \([0-9]*\) buckets.*/\1/p' "$out/demo.log")
  hidden=$(sed -E -n 's/.* ([0-9]+) % of the ([0-9.]+) ms of communication.*other ([0-9.]+) ms.*/\1 % | \2 ms | \3 ms/p' <<< "$lesson1")
  lesson2=$(grep -A2 '^Lesson 2' "$out/demo.log" | tr '\n' ' ' |
            sed -E -n 's/.*\(x([0-9.]+)\).* a step x([0-9.]+) as long.*/x\1 | x\2/p')
  step=$(grep -m1 '  step time' "$out/demo.log" | sed -E -n 's/ *step time +([0-9.]+) ms.*/\1 ms/p')
  accuracy=$(grep '^  accuracy ' "$out/demo.log" | awk '{print $2}' | paste -sd/ -)
  echo "| $load | $run | $hidden | $buckets | $lesson2 | $step | $accuracy | ${wall} s |"
done
