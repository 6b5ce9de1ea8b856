#!/usr/bin/env bash
# DDP step time: `dpscope train --strategy ddp` against PyTorch's own DistributedDataParallel,
# and full tracing against tracing off (docs/design.md, Quality bars: ratio <= 1.0, tracing <= 2 %),
# with the memory categories by tracking (the CPU's default) and by ownership (a GPU's default).
#
#   bench/ddp_vs_pytorch.sh [--mode all|parity|aa] [BUILD_DIR] [ROUNDS] [STEPS]   (defaults: all build 5 80)
#
# --mode parity runs only ours and torch, an interleaved pair a round (issue 51's 21 pairs are
# three runs of 7); --mode aa runs PyTorch against itself the same way (torch and torch2), which
# shows how far two identical sides part on this machine.
#
# Each round runs, in an order that alternates from round to round, four 2-rank runs under
# `BUILD_DIR/bin/dpscope launch -n 2`:
#   ours   dpscope train --strategy ddp ... --trace-level off
#   torch  /usr/bin/python3 bench/pytorch_ddp_step.py (PyTorch 1.13 DDP, gloo)
#   full   dpscope train ... --trace-level full (trace into a temporary directory)
#   own    full with --memory-accounting ownership (each sample walks the ownership registry)
# on the same mlp (hidden 1024, 3 layers, batch 64 per rank, synthetic data, gloo, 1 thread per
# rank, OMP_NUM_THREADS=1). Every run prints rank 0's `step_ms` (median of steps 3..K); the
# summary is the median over rounds of those medians, the min-max over rounds, and the ratios.
set -euo pipefail

mode=all
if [[ "${1:-}" == --mode ]]; then
  mode="${2:?--mode needs all, parity or aa}"
  shift 2
fi
case "$mode" in
  all) variants=(ours torch full own) ;;
  parity) variants=(ours torch) ;;
  aa) variants=(torch torch2) ;;
  *) echo "--mode $mode: choose all, parity or aa" >&2; exit 2 ;;
esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-$root/build}"
rounds="${2:-5}"
steps="${3:-80}"
bin="$build/bin"
python=/usr/bin/python3
[[ -x "$bin/dpscope" ]] || { echo "no $bin/dpscope; build it first (ninja -C $build dpscope)" >&2; exit 1; }
"$python" -c 'import torch' 2>/dev/null || { echo "$python has no torch (apt install python3-torch)" >&2; exit 1; }

export OMP_NUM_THREADS=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

model=(--model mlp --hidden 1024 --layers 3 --batch-size 64 --steps "$steps")
run_ours() {  # $1 = trace level, $2 = memory accounting
  "$bin/dpscope" launch -n 2 -- "$bin/dpscope" train --strategy ddp --backend gloo --threads 1 \
    "${model[@]}" --progress-every 1 --trace-level "$1" --memory-accounting "$2" --trace "$tmp/trace-$1" \
    > "$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
  rm -rf "$tmp/trace-$1"
}
run_torch() {
  "$bin/dpscope" launch -n 2 -- "$python" "$here/pytorch_ddp_step.py" --threads 1 \
    "${model[@]}" --progress-every 1 > "$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
}
# Runs variant $1 and prints rank 0's step_ms; appends its per-step times (steps 3..K, from the
# progress lines, printed after each step's clock stopped) to $tmp/steps-$1.
run() {
  case "$1" in
    ours) run_ours off tracking ;;
    full) run_ours full tracking ;;
    own) run_ours full ownership ;;
    torch | torch2) run_torch ;;
  esac
  sed -n 's/^\[0\] step \([0-9]*\)\/.* \([0-9.]*\) ms$/\1 \2/p' "$tmp/out" |
    awk '$1 >= 3 {print $2}' >> "$tmp/steps-$1"
  sed -n 's/^\[0\] step_ms \([0-9.]*\).*/\1/p' "$tmp/out"
}

echo "machine: $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "blas: $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)"
printf '%-6s' round; printf ' %10s' "${variants[@]/%/_ms}"; echo
declare -A series=()
for ((r = 0; r < rounds; ++r)); do
  order=("${variants[@]}")
  if ((r % 2 == 1)); then order=(); for ((i = ${#variants[@]} - 1; i >= 0; --i)); do order+=("${variants[i]}"); done; fi
  declare -A got=()
  for v in "${order[@]}"; do got[$v]="$(run "$v")"; done
  printf '%-6s' "$((r + 1))"
  for v in "${variants[@]}"; do series[$v]+=" ${got[$v]}"; printf ' %10s' "${got[$v]}"; done
  echo
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at end"

if [[ "$mode" != all ]]; then
  # A pair a round: the ratio of the first variant to the second, and how the rounds spread.
  "$python" - "$mode" "${series[${variants[0]}]}" "${series[${variants[1]}]}" <<'EOF'
import statistics, sys
mode, a, b = sys.argv[1], [float(v) for v in sys.argv[2].split()], [float(v) for v in sys.argv[3].split()]
names = ("ours", "pytorch") if mode == "parity" else ("pytorch (A)", "pytorch (B)")
ratios = sorted(x / y for x, y in zip(a, b))
q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else ratios * 3
print(f"{names[0]} median {statistics.median(a):.3f} ms, {names[1]} median {statistics.median(b):.3f} ms")
print(f"ratio {names[0]}/{names[1]} per pair: median {statistics.median(ratios):.3f}"
      f"  min {ratios[0]:.3f}  p25 {q[0]:.3f}  p75 {q[2]:.3f}  max {ratios[-1]:.3f}")
print("pairs " + " ".join(f"{r:.3f}" for r in ratios))
EOF
  exit 0
fi

"$python" - "${series[ours]}" "${series[torch]}" "${series[full]}" "${series[own]}" "$tmp" <<'EOF'
import statistics, sys
ours, torch, full, own = ([float(v) for v in arg.split()] for arg in sys.argv[1:5])
med = statistics.median
steps = {v: sorted(float(x) for x in open(f"{sys.argv[5]}/steps-{v}")) for v in ("ours", "torch", "full", "own")}
def pct(values, q):
    return values[min(len(values) - 1, int(q * len(values)))]
print("all steps 3..K of all rounds (rank 0):   p10      p25   median      p75      p90 ms")
for v, name in (("ours", "ours (off)"), ("torch", "pytorch ddp"), ("full", "ours (full)"),
                ("own", "ownership")):
    s = steps[v]
    print(f"  {name:12s} {len(s):5d} steps " + " ".join(f"{pct(s, q):8.3f}" for q in (.1, .25, .5, .75, .9)))
print(f"  pooled ratio ours/pytorch: p25 {pct(steps['ours'], .25) / pct(steps['torch'], .25):.3f}"
      f"  median {pct(steps['ours'], .5) / pct(steps['torch'], .5):.3f};"
      f"  full vs off: p25 {100 * (pct(steps['full'], .25) / pct(steps['ours'], .25) - 1):+.1f} %"
      f"  median {100 * (pct(steps['full'], .5) / pct(steps['ours'], .5) - 1):+.1f} %;"
      f"  ownership vs off: median {100 * (pct(steps['own'], .5) / pct(steps['ours'], .5) - 1):+.1f} %")
print("per-run step_ms (median of steps 3..K), over rounds:")
for name, values in (("ours (off)", ours), ("pytorch ddp", torch), ("ours (full)", full),
                     ("ownership", own)):
    print(f"{name:12s} median {med(values):8.3f} ms   min {min(values):8.3f}   max {max(values):8.3f}")
ratios = [o / t for o, t in zip(ours, torch)]
trace = [f / o - 1 for f, o in zip(full, ours)]
print(f"ratio ours/pytorch {med(ours) / med(torch):.3f}   per round "
      + " ".join(f"{r:.3f}" for r in ratios))
print(f"tracing full vs off {100 * (med(full) / med(ours) - 1):+.1f} %   per round "
      + " ".join(f"{100 * t:+.1f}" for t in trace))
owned = [w / o - 1 for w, o in zip(own, ours)]
print(f"tracing full with ownership vs off {100 * (med(own) / med(ours) - 1):+.1f} %   per round "
      + " ".join(f"{100 * t:+.1f}" for t in owned)
      + f";  vs full by tracking {100 * (med(own) / med(full) - 1):+.1f} %")
EOF
