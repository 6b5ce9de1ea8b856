#!/usr/bin/env bash
# DDP's buckets on an emulated cluster link (Note [Link emulation]): 1 MiB buckets against one
# bucket, both on a 4 Gb/s, 50 us link, and how close the bucketed run gets to the link's limit.
#
#   bench/link_buckets.sh [BUILD_DIR] [ROUNDS] [STEPS] [BATCH] [GBPS]  (defaults: build 5 40 32 4)
#
# GBPS changes the link's bandwidth (the issue's bar is for 4 Gb/s): with a fast enough link the
# communication fits under backward and the step is compute-bound, as the bar assumes.
#
# Each round runs, in an order that alternates from round to round, two 2-rank runs of
#   dpscope launch -n 2 -- dpscope train --model mlp --hidden 1024 --layers 3 --batch-size BATCH
#     --link-gbps GBPS --link-latency-us 50 --threads 1 --trace-level summary
# with --bucket-cap-mb 1 --first-bucket-mb 1 ("bucketed") and --bucket-cap-mb 100
# --first-bucket-mb 100 ("single"), and prints rank 0's step_ms (median of steps 3..K). The
# summary gives the medians over rounds and their ratio (the bar: bucketed <= 0.85 of single),
# and, from every bucketed trace (steps 3..K, every rank):
#   exposed    the exposed communication of the iteration (`dpscope stats --json`:
#              ranks[].iterations[].overlap.exposed_comm_ms), i.e. the wait after backward
#   last       the last bucket's own all-reduce: the ring model's time for it on this link
#   link_min   the least exposure the link allows: when the link could have carried every
#              bucket (their model times, one after the other from the first bucket's start on
#              the link), less the end of backward's compute (finalize_backward's begin); at
#              least `last`
# and the medians of exposed/last (the goal: <= 1.2) and exposed/link_min; last, the floor the
# link puts under the ratio: the single bucket's step less the part of its backward compute
# after the moment the first bucket is issued in the bucketed runs (rank 0, medians).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-$root/build}"
rounds="${2:-5}"
steps="${3:-40}"
batch="${4:-32}"
gbps="${5:-4}"
bin="$build/bin"
python=/usr/bin/python3
[[ -x "$bin/dpscope" ]] || { echo "no $bin/dpscope; build it first (ninja -C $build dpscope)" >&2; exit 1; }

export OMP_NUM_THREADS=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Runs variant $1 (bucketed | single) of round $2 and prints rank 0's step_ms.
run() {
  local cap=1
  [[ "$1" == single ]] && cap=100
  "$bin/dpscope" launch -n 2 --trace-dir "$tmp/$1-$2" -- "$bin/dpscope" train --strategy ddp \
    --backend gloo --threads 1 --model mlp --hidden 1024 --layers 3 --batch-size "$batch" \
    --steps "$steps" --progress-every 0 --trace-level summary --link-gbps "$gbps" \
    --link-latency-us 50 --bucket-cap-mb "$cap" --first-bucket-mb "$cap" \
    > "$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
  "$bin/dpscope" stats --json "$tmp/$1-$2/run.sqlite" > "$tmp/$1-$2/stats.json"
  sed -n 's/^\[0\] step_ms \([0-9.]*\).*/\1/p' "$tmp/out"
}

echo "machine: $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "link $gbps Gb/s, 50 us; mlp hidden 1024, 3 layers, batch $batch per rank, $steps steps, 2 ranks"
printf '%-6s %12s %12s\n' round bucketed_ms single_ms
declare -a bucketed single
for ((r = 0; r < rounds; ++r)); do
  if ((r % 2 == 0)); then order=(bucketed single); else order=(single bucketed); fi
  declare -A got=()
  for v in "${order[@]}"; do got[$v]="$(run "$v" "$r")"; done
  bucketed+=("${got[bucketed]}"); single+=("${got[single]}")
  printf '%-6s %12s %12s\n' "$((r + 1))" "${got[bucketed]}" "${got[single]}"
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at end"

"$python" - "${bucketed[*]}" "${single[*]}" "$tmp" "$rounds" "$gbps" <<'EOF'
import json, sqlite3, statistics, sys
bucketed, single = ([float(v) for v in arg.split()] for arg in sys.argv[1:3])
tmp, rounds, gbps = sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
med = statistics.median
print(f"step_ms over rounds: bucketed median {med(bucketed):.3f} (min {min(bucketed):.3f}, "
      f"max {max(bucketed):.3f}); single median {med(single):.3f} (min {min(single):.3f}, "
      f"max {max(single):.3f})")
print(f"ratio bucketed/single {med(bucketed) / med(single):.3f}   per round "
      + " ".join(f"{b / s:.3f}" for b, s in zip(bucketed, single)))

def model_ns(nbytes):  # a 2-rank all-reduce on GBPS Gb/s, 50 us: 2 (L + S/(2B)) (link_model.h)
    return 2 * (50e3 + nbytes / 2 * 8 / gbps)

exposed_all, last_all, limit_all, to_last, to_limit = [], [], [], [], []
for r in range(rounds):
    path = f"{tmp}/bucketed-{r}"
    stats = json.load(open(f"{path}/stats.json"))
    db = sqlite3.connect(f"{path}/run.sqlite")
    for rank in stats["ranks"]:
        for it in rank["iterations"]:
            i = it["iteration"]
            if i < 2:  # steps 3..K, as step_ms
                continue
            spans = db.execute(
                "SELECT bucket, begin_ns, bytes FROM events WHERE kind = 5 AND op = 1 AND rank = ?"
                " AND iteration = ? AND bucket IS NOT NULL ORDER BY bucket", (rank["rank"], i)).fetchall()
            finalize = db.execute(
                "SELECT e.begin_ns FROM events e JOIN names n ON n.id = e.name WHERE e.kind = 0"
                " AND n.name = 'finalize_backward' AND e.rank = ? AND e.iteration = ?",
                (rank["rank"], i)).fetchone()
            if not spans or not finalize:
                continue
            exposed = it["overlap"]["exposed_comm_ms"]
            last = model_ns(spans[-1][2]) / 1e6
            carried = spans[0][1] + sum(model_ns(nbytes) for _, _, nbytes in spans)
            limit = max(last, (carried - finalize[0]) / 1e6)
            exposed_all.append(exposed); last_all.append(last); limit_all.append(limit)
            to_last.append(exposed / last); to_limit.append(exposed / limit)
print(f"bucketed, {len(exposed_all)} iterations of every rank: median exposed {med(exposed_all):.3f} ms,"
      f" last bucket's all-reduce {med(last_all):.3f} ms, link_min {med(limit_all):.3f} ms")
print(f"exposed / last bucket {med(to_last):.2f} (goal <= 1.2);  exposed / link_min {med(to_limit):.2f}")

# The best bucketing can do on this link: the single bucket's step less the part of backward's
# compute that comes after the first bucket is ready (only that part can hide communication).
def phases(path, rank=0):
    db = sqlite3.connect(f"{path}/run.sqlite")
    rows = db.execute(
        "SELECT e.iteration, n.name, e.begin_ns FROM events e JOIN names n ON n.id = e.name"
        " WHERE e.kind = 0 AND e.rank = ? AND e.iteration >= 2"
        " AND n.name IN ('backward', 'finalize_backward')", (rank,)).fetchall()
    begin = {}
    for i, name, t in rows:
        begin.setdefault(i, {})[name] = t
    first = dict(db.execute(
        "SELECT iteration, MIN(enqueue_ns) FROM events WHERE kind = 5 AND op = 1 AND rank = ?"
        " AND iteration >= 2 AND bucket IS NOT NULL GROUP BY iteration", (rank,)).fetchall())
    return begin, first
autograd_single, first_ready = [], []
for r in range(rounds):
    begin, _ = phases(f"{tmp}/single-{r}")
    autograd_single += [(b["finalize_backward"] - b["backward"]) / 1e6 for b in begin.values()]
    begin, first = phases(f"{tmp}/bucketed-{r}")
    first_ready += [(first[i] - b["backward"]) / 1e6 for i, b in begin.items() if i in first]
floor = med(single) - (med(autograd_single) - med(first_ready))
print(f"link-bound floor: single's backward compute {med(autograd_single):.3f} ms, first bucket"
      f" issued {med(first_ready):.3f} ms into backward (bucketed) -> at best"
      f" {floor:.3f} ms, ratio {floor / med(single):.3f}")
EOF
