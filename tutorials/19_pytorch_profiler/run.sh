#!/usr/bin/env bash
# Tutorial 19: a PyTorch profiler trace beside dpscope's. Records PyTorch's own DDP with
# torch.profiler (2 ranks, Gloo, on the CPU), imports the profiler's files with `dpscope import`,
# trains the same shape of model with dpscope's DDP, and prints, step by step, what the two traces
# agree on and what only dpscope records. The README says what to look at in the viewer.
#   tutorials/19_pytorch_profiler/run.sh [--bin DIR] [--out DIR] [--steps N]
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$root/build/bin"
out="traces/t19"
steps=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    *) echo "usage: tutorials/19_pytorch_profiler/run.sh [--bin DIR] [--out DIR] [--steps N] (got '$1')" >&2; exit 2 ;;
  esac
done
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --steps must be a positive whole number (got '$steps')" >&2; exit 2; }
for tool in dpscope dpscope-view; do
  [[ -x "$bin/$tool" ]] || { echo "run.sh: no $bin/$tool; build it first (scripts/setup, or cmake --build build)" >&2; exit 1; }
done
python=/usr/bin/python3
"$python" -c "import torch" 2>/dev/null ||
  { echo "run.sh: $python cannot import torch; install Debian's python3-torch (scripts/setup does)" >&2; exit 1; }
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rm -rf "$out/pytorch" "$out/dpscope" "$out/pytorch.sqlite"

echo "19. A PyTorch profiler trace beside dpscope's"
echo
echo "1. PyTorch's own DDP (torch $("$python" -c 'import torch; print(torch.__version__)'), 2 ranks, Gloo): eight Linear 256x256 layers"
echo "   and a 10-way head, bucket_cap_mb 0.3, batch 32 a rank, torch.profiler over $((steps + 1)) steps:"
"$python" "$root/tests/formats/kineto_ddp.py" "$out/pytorch" 2 "$steps"
echo "   $out/pytorch/rank-0.json, rank-1.json"
echo
echo "2. dpscope import: one run file of both ranks"
"$bin/dpscope" import "$out/pytorch/rank-0.json" "$out/pytorch/rank-1.json" -o "$out/pytorch.sqlite" 2>&1 |
  grep -v "no distributedInfo.rank" | sed 's/^/   /'
echo "   (PyTorch 1.13's CPU profiler writes no distributedInfo: the ranks are the files' order)"
echo
echo "3. The same shape in dpscope's DDP: mlp, 8 blocks of 256, 64 synthetic inputs, bucket cap 0.3 MiB"
"$bin/dpscope" launch -n 2 --trace-dir "$out/dpscope" -- "$bin/dpscope" train --model mlp --data synthetic \
  --hidden 256 --layers 8 --batch-size 32 --bucket-cap-mb 0.3 --steps $((steps + 1)) --threads 1 \
  --progress-every 0 > "$out/dpscope.log" 2>&1 || { cat "$out/dpscope.log" >&2; exit 1; }
echo "   $out/dpscope/run.sqlite"
echo
"$bin/dpscope" stats --json "$out/pytorch.sqlite" > "$out/pytorch.json"
"$bin/dpscope" stats --json "$out/dpscope/run.sqlite" > "$out/dpscope.json"
"$python" - "$out/pytorch/ddp.json" "$out/pytorch.json" "$out/dpscope.json" <<'EOF'
import json
import sys

ddp, pytorch, ours = (json.load(open(path)) for path in sys.argv[1:4])
buckets = ddp["rebuilt_bucket_sizes"]


def steps(stats, first):
    # Rank 0's iterations from `first` on, the last profiled one left out: the profiler stops at
    # its end, before Gloo's threads have closed its last all-reduces.
    its = stats["ranks"][0]["iterations"]
    return [it for it in its if it["iteration"] >= first][: len(its) - 1]


# PyTorch's profiled steps come after two warm-up steps, its buckets already rebuilt; dpscope's
# iteration 0 runs DDP's one initial bucket, so its steps are read from iteration 1.
theirs_steps, our_steps = steps(pytorch, 0), steps(ours, 1)


def allreduces(stats, iteration):
    # Rank 0's all-reduces of one step in the order they began: DDP's buckets 0, 1, ...
    found = [c for c in stats["ranks"][0]["collectives"]
             if c["iteration"] == iteration and c["kind"] == "allreduce"]
    return sorted(found, key=lambda c: c["begin_ms"])


def median(values):
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def busbw_gbps(nbytes, transfer_ms, ranks=2):
    # nccl-tests' bus bandwidth of an all-reduce, in gigabits a second (docs/communication.md).
    if not nbytes or not transfer_ms:
        return None
    return nbytes * 8 / (transfer_ms / 1e3) / 1e9 * 2 * (ranks - 1) / ranks


def cell(value, form="%.2f"):
    return "-" if value is None else form % value


print("4. Rank 0, step by step (dpscope stats --json on each run file):")
print("   PyTorch's DDP says it built %d buckets after the rebuild: %s bytes" % (len(buckets), ", ".join(map(str, buckets))))
print("   %-6s %-28s %s" % ("step", "PyTorch: gloo:all_reduce ops", "dpscope: all-reduces, hooks"))
for row in range(min(len(theirs_steps), len(our_steps))):
    theirs, mine = theirs_steps[row], our_steps[row]
    sizes = [c["bytes"] for c in allreduces(ours, mine["iteration"])]
    left = "%d" % theirs["collectives"]["allreduce"]
    right = "%d (%s B), %d hooks" % (len(sizes), " + ".join(map(str, sizes)), mine["hooks"])
    print("   %-6d %-28s %s" % (row + 1, left, right))
print()
# The import numbers each step's all-reduces as DDP's buckets (docs/kineto.md, "DDP's buckets");
# PyTorch 1.13's CPU trace gives them no sizes, so their busbw takes the bytes DDP logged.
theirs_plan = pytorch["buckets"]
print("   The buckets, as each trace gives them (busbw: nccl-tests' bus bandwidth in Gb/s over the")
print("   transfer, the median of the steps compared; PyTorch's from the bytes its logging data gives):")
print("   %-7s %-36s %s" % ("bucket", "PyTorch's trace: bytes, busbw", "dpscope's trace: bytes, busbw"))
for b in range(max(len(theirs_plan), len(buckets))):
    theirs_bytes = theirs_plan[b]["bytes"] if b < len(theirs_plan) else None
    logged = buckets[b] if b < len(buckets) else None
    theirs_bw = median(busbw_gbps(logged, step[b]["transfer_ms"])
                       for step in (allreduces(pytorch, s["iteration"]) for s in theirs_steps) if b < len(step))
    ours_cols = [step[b] for step in (allreduces(ours, s["iteration"]) for s in our_steps) if b < len(step)]
    ours_bytes = ours_cols[0]["bytes"] if ours_cols else None
    ours_bw = median(c["busbw_gbps"] for c in ours_cols)
    left = "%s (DDP logged %s), %s" % ("?" if theirs_bytes is None else theirs_bytes, cell(logged, "%d"), cell(theirs_bw))
    right = "%s, %s" % (cell(ours_bytes, "%d"), cell(ours_bw))
    print("   %-7d %-36s %s" % (b, left, right))
print()
# PyTorch's last profiled step may miss an all-reduce on one rank (the profiler stopped before
# Gloo's thread closed it): a mismatch there is the left-out step's, numbered after every
# collective of the steps compared (seq counts each rank's collectives from 0).
compared = sum(step["collectives"]["allreduce"] for step in theirs_steps)
for name, stats in (("PyTorch's", pytorch), ("dpscope's", ours)):
    m = stats["collective_matching"]
    in_compared = ""
    if name == "PyTorch's":
        in_compared = " (%d in the steps compared)" % sum(1 for x in m["mismatched"] if x["seq"] < compared)
    print("   %s trace: %d collectives matched on both ranks, %d mismatched%s, largest skew %.3f ms"
          % (name, m["collectives"], m["mismatches"], in_compared, m["max_skew_ms"]))
print("   Both: one all-reduce per bucket per step, %d buckets (the import counts %d), matched across"
      % (len(buckets), len(theirs_plan)))
print("   the ranks. Only dpscope's: each all-reduce's bytes, the gradient hooks that fill the")
print("   buckets, the buckets' fill and launch moments, memory by category, and the thread CPU time")
print("   the cluster clock replays.")
EOF
echo
echo "5. Look at them side by side, aligned on the iteration (tutorials/19_pytorch_profiler/README.md):"
echo "   $bin/dpscope-view $out/pytorch.sqlite --compare $out/dpscope/run.sqlite"
