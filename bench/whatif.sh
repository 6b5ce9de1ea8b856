#!/usr/bin/env bash
# How good `dpscope whatif`'s predictions are (issue 19's bar: within 15 % of the measured median
# step): records one DDP run (mlp hidden 1024 x 3 layers, 2 ranks, batch 32, an emulated 4 Gb/s,
# 50 µs link, 1 MiB buckets), predicts other caps from its trace alone (first bucket = cap), then
# trains each cap for real and prints prediction against measurement, one line per cap.
# Usage: bench/whatif.sh [BUILD_DIR] [STEPS] [CAPS...]   (default: build 30 0.25 4 100)
set -euo pipefail
build=${1:-build}
steps=${2:-30}
shift $(( $# > 2 ? 2 : $# )) || true
caps=("$@")
[ ${#caps[@]} -gt 0 ] || caps=(0.25 4 100)
bin="$build/bin"
[ -x "$bin/dpscope" ] || { echo "whatif.sh: $bin/dpscope is missing; build it first: cmake --build $build --target dpscope" >&2; exit 1; }
dir=${DPSCOPE_BENCH_DIR:-/tmp/dpscope-bench}/whatif
rm -rf "$dir"
mkdir -p "$dir"

train() { # CAP OUT
  "$bin/dpscope" launch -n 2 --link-gbps 4 --link-latency-us 50 -- "$bin/dpscope" train --model mlp \
    --hidden 1024 --layers 3 --batch-size 32 --steps "$steps" --threads 1 --progress-every 0 \
    --bucket-cap-mb "$1" --first-bucket-mb "$1" --trace "$2" > "$2.log" 2>&1 ||
    { cat "$2.log" >&2; echo "whatif.sh: the run with cap $1 MiB failed" >&2; exit 1; }
}
median_step() { # TRACE
  "$bin/dpscope" stats --json "$1" | python3 -c '
import json, statistics, sys
rank = json.load(sys.stdin)["ranks"][0]
print("%.2f" % statistics.median(it["step_ms"] for it in rank["iterations"][2:]))'
}

train 1 "$dir/recorded.sqlite"
echo "recorded: cap 1 MiB, median step $(median_step "$dir/recorded.sqlite") ms ($steps steps, 2 ranks, emulated 4 Gb/s, 50 us)"
printf "%10s %14s %14s %8s\n" "cap MiB" "predicted ms" "measured ms" "error"
for cap in "${caps[@]}"; do
  predicted=$("$bin/dpscope" whatif --json --bucket-cap-mb "$cap" --first-bucket-mb "$cap" "$dir/recorded.sqlite" |
              python3 -c 'import json, sys; print("%.2f" % json.load(sys.stdin)["predicted_step_ms"])')
  train "$cap" "$dir/cap-$cap.sqlite"
  measured=$(median_step "$dir/cap-$cap.sqlite")
  printf "%10s %14s %14s %7.1f%%\n" "$cap" "$predicted" "$measured" \
    "$(python3 -c "print(100 * ($predicted - $measured) / $measured)")"
done
