#!/usr/bin/env bash
# FSDP memory: peak memory per rank of FULL_SHARD against DDP (issue bar: FSDP <= 0.6 of DDP, and
# within 15% of the analytic figure written beside the numbers in bench/README.md).
#
#   bench/fsdp_memory.sh [BUILD_DIR] [STEPS]      (defaults: build 6)
#
# 4 ranks under `BUILD_DIR/bin/dpscope launch -n 4`: the mlp of hidden 1024 and 4 layers on the
# digits, batch 32 per rank, SGD with momentum 0.9, gloo, full tracing (the tracking allocator
# counts every CPU allocation; `peak_memory_mb` is its peak over the whole run), once with
# `--strategy ddp` and once with `--strategy fsdp --sharding full --wrap-min-params 1` (every
# Linear a unit of its own). Prints each rank's peak and the ratio of the largest peaks.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-$root/build}"
steps="${2:-6}"
bin="$build/bin"
[[ -x "$bin/dpscope" ]] || { echo "no $bin/dpscope; build it first (ninja -C $build dpscope)" >&2; exit 1; }

export OMP_NUM_THREADS=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
common=(--model mlp --hidden 1024 --layers 4 --data digits --batch-size 32 --momentum 0.9
        --steps "$steps" --threads 1 --progress-every 0)

peak_of() {  # NAME ARGS...: runs, prints "rank peak" lines, returns the largest peak
  local name="$1"; shift
  "$bin/dpscope" launch -n 4 --trace-dir "$tmp/$name" -- "$bin/dpscope" train "${common[@]}" "$@" \
    > "$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log" >&2; exit 1; }
  sed -n 's/^\[\([0-9]\)\] peak_memory_mb \([0-9.]*\) (\(.*\))$/\1 \2  (\3)/p' "$tmp/$name.log" | sort -n
}

echo "ddp (peak MiB per rank):"
ddp="$(peak_of ddp --strategy ddp)"
echo "$ddp"
echo "fsdp full_shard, every Linear a unit (peak MiB per rank):"
fsdp="$(peak_of fsdp --strategy fsdp --sharding full --wrap-min-params 1)"
echo "$fsdp"
max_ddp="$(echo "$ddp" | awk '{ if ($2 > m) m = $2 } END { print m }')"
max_fsdp="$(echo "$fsdp" | awk '{ if ($2 > m) m = $2 } END { print m }')"
awk -v d="$max_ddp" -v f="$max_fsdp" 'BEGIN { printf "largest peak: ddp %.2f MiB, fsdp %.2f MiB, fsdp/ddp %.3f\n", d, f, f / d }'
