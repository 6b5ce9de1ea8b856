#!/usr/bin/env bash
# FSDP memory: peak memory per rank of FSDP1's FULL_SHARD and FSDP2's fully_shard against DDP
# (issue bars: each <= 0.6 of DDP, FSDP1 within 15% of the analytic figure written beside the
# numbers in bench/README.md), and FSDP1 against FSDP2: peak, padding, bytes on the wire.
#
#   bench/fsdp_memory.sh [BUILD_DIR] [STEPS]      (defaults: build 6)
#
# 4 ranks under `BUILD_DIR/bin/dpscope launch -n 4`: the mlp of hidden 1024 and 4 layers on the
# digits, batch 32 per rank, SGD with momentum 0.9, gloo, full tracing (the tracking allocator
# counts every CPU allocation; `peak_memory_mb` is its peak over the whole run), with
# `--strategy ddp`, `--strategy fsdp --sharding full --wrap-min-params 1` (every Linear a unit of
# its own), `--strategy fsdp2 --wrap-min-params 1` (every Linear a fully_shard group) and the same
# as HSDP, `--sharding hybrid --shard-group-size 2` (two replicas of two ranks). Prints
# each rank's peak and the ratios of the largest peaks; then, from `dpscope stats --json` of each
# trace, the padding (padded minus real elements of every unit or group, float32) and the bytes
# rank 0 sends a step in a ring, summed over its process groups ("groups", each collective on its
# own group's ranks: docs/communication.md's ring, an all-gather (n-1) x this rank's chunk, a
# reduce-scatter (n-1)/n x its input, an all-reduce 2(n-1)/n x its tensor), and how much of it
# goes to the replicate group (HSDP's link across hosts).
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

peak_of() {  # NAME ARGS...: runs, prints "rank peak" lines
  local name="$1"; shift
  "$bin/dpscope" launch -n 4 --trace-dir "$tmp/$name" -- "$bin/dpscope" train "${common[@]}" "$@" \
    > "$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log" >&2; exit 1; }
  sed -n 's/^\[\([0-9]\)\] peak_memory_mb \([0-9.]*\) (\(.*\))$/\1 \2  (\3)/p' "$tmp/$name.log" | sort -n
}
largest() { awk '{ if ($2 > m) m = $2 } END { print m }'; }

echo "ddp (peak MiB per rank):"
ddp="$(peak_of ddp --strategy ddp)"
echo "$ddp"
echo "fsdp (FSDP1) full_shard, every Linear a unit (peak MiB per rank):"
fsdp="$(peak_of fsdp --strategy fsdp --sharding full --wrap-min-params 1)"
echo "$fsdp"
echo "fsdp2 (fully_shard) on every Linear, reshard_after_forward true (peak MiB per rank):"
fsdp2="$(peak_of fsdp2 --strategy fsdp2 --wrap-min-params 1)"
echo "$fsdp2"
echo "hsdp (fully_shard, --sharding hybrid --shard-group-size 2) (peak MiB per rank):"
hsdp="$(peak_of hsdp --strategy fsdp2 --wrap-min-params 1 --sharding hybrid --shard-group-size 2)"
echo "$hsdp"
max_ddp="$(echo "$ddp" | largest)"
max_fsdp="$(echo "$fsdp" | largest)"
max_fsdp2="$(echo "$fsdp2" | largest)"
max_hsdp="$(echo "$hsdp" | largest)"
awk -v d="$max_ddp" -v f="$max_fsdp" -v g="$max_fsdp2" -v h="$max_hsdp" 'BEGIN {
  printf "largest peak: ddp %.2f MiB, fsdp %.2f MiB (fsdp/ddp %.3f), fsdp2 %.2f MiB (fsdp2/ddp %.3f), hsdp %.2f MiB (hsdp/ddp %.3f)\n",
         d, f, f / d, g, g / d, h, h / d }'

echo
echo "padding and bytes on the wire (rank 0, a step: the steps' average):"
for name in ddp fsdp fsdp2 hsdp; do
  "$bin/dpscope" stats --json "$tmp/$name/run.sqlite" > "$tmp/$name.json"
done
/usr/bin/python3 - "$tmp" <<'EOF'
import json, sys
tmp = sys.argv[1]
print(f"  {'run':6} {'padding':>10} {'sent a step':>12} {'of it across replicas':>22}")
for name in ("ddp", "fsdp", "fsdp2", "hsdp"):
    stats = json.load(open(f"{tmp}/{name}.json"))
    padding = sum(u["padded_numel"] - u["numel"] for u in stats["units"]) * 4
    # Rank 0's groups, each by its own size (stats' ring model, averaged over the steps).
    mine = [g for g in stats["groups"] if 0 in g["ranks"]]
    sent = sum(g["wire_bytes_per_step"] for g in mine)
    across = sum(g["wire_bytes_per_step"] for g in mine if g["name"].startswith("replicate"))
    print(f"  {name:6} {padding:>8} B {sent / 1e6:>9.3f} MB {across / 1e6:>19.3f} MB")
EOF
