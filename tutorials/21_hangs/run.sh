#!/usr/bin/env bash
# Tutorial 21: when training hangs. Four runs of `dpscope train` on 2 or 3 ranks that hang on purpose,
# each stopped in seconds by a short collective timeout: (a) a branch one rank skips, under DDP
# without find_unused_parameters; (b) a metric all-reduced on rank 0 only; (c) FSDP2 with one rank
# skipping a unit's all-gather; (d) the same as (a) with DPSCOPE_CHECK_COLLECTIVES=1. For each:
# what the launcher says, dpscope's hang section, and the flight-recorder dumps written beside the
# trace. The README says what each means and the fix.
#   tutorials/21_hangs/run.sh [--bin DIR] [--out DIR] [--timeout S] [--scenario a|b|c|d]...
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$root/build/bin"
out="traces/t21"
timeout=3
scenarios=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --scenario) scenarios+=("$2"); shift 2 ;;
    *) echo "usage: tutorials/21_hangs/run.sh [--bin DIR] [--out DIR] [--timeout S] [--scenario a|b|c|d]... (got '$1')" >&2; exit 2 ;;
  esac
done
((${#scenarios[@]})) || scenarios=(a b c d)
for s in "${scenarios[@]}"; do
  [[ "$s" =~ ^[abcd]$ ]] || { echo "run.sh: --scenario takes a, b, c or d (got '$s')" >&2; exit 2; }
done
[[ -x "$bin/dpscope" ]] || { echo "run.sh: no $bin/dpscope; build it first (scripts/setup, or cmake --build build)" >&2; exit 1; }
mkdir -p "$out"
out="$(cd "$out" && pwd)"

title() {
  case "$1" in
    a) echo "(a) A branch one rank skips, under DDP without find_unused_parameters" ;;
    b) echo "(b) A metric all-reduced on rank 0 only" ;;
    c) echo "(c) FSDP2: one rank skips a unit's all-gather" ;;
    d) echo "(d) (a) again, with DPSCOPE_CHECK_COLLECTIVES=1" ;;
  esac
}

# How many ranks scenario $1 runs: (b) three, so that the odd rank out is plain to see.
ranks_of() { [[ "$1" == b ]] && echo 3 || echo 2; }

# The training of scenario $1 under `dpscope launch`, its environment first.
command_of() {
  local train=("$bin/dpscope" train --steps 20 --timeout "$timeout" --progress-every 0)
  case "$1" in
    a) echo "" "${train[@]}" --model branch ;;
    b) echo "" "${train[@]}" --model mlp --data digits --all-reduce-loss rank-0-only ;;
    c) echo "DPSCOPE_FAULT=allgather#9@1:skip" "${train[@]}" --model mlp --data digits --strategy fsdp2 --wrap-min-params 1000 ;;
    d) echo "DPSCOPE_CHECK_COLLECTIVES=1" "${train[@]}" --model branch ;;
  esac
}

echo "21. When training hangs (collectives time out after $timeout s)"
for s in "${scenarios[@]}"; do
  dir="$out/$s"
  rm -rf "$dir"
  read -r -a words <<< "$(command_of "$s")"
  environment=()
  while [[ "${words[0]}" == *=* ]]; do environment+=("${words[0]}"); words=("${words[@]:1}"); done
  echo
  title "$s"
  ranks=$(ranks_of "$s")
  echo "   ${environment[*]:+${environment[*]} }dpscope launch -n $ranks -- dpscope train ${words[*]:2}"
  start=$(date +%s.%N)
  status=0
  env "${environment[@]}" "$bin/dpscope" launch -n "$ranks" --trace-dir "$dir" -- "${words[@]}" > "$dir.log" 2>&1 || status=$?
  seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  echo "   stopped after $seconds s, exit status $status; the launcher's last lines:"
  grep "^dpscope launch: \(failed\|hang\)" "$dir.log" | sed 's/^/     /'
  echo "   dpscope stats $dir/run.sqlite, its hang section:"
  "$bin/dpscope" stats "$dir/run.sqlite" | sed -n '/^hang:/,/^  group /p' | sed '$d' | sed 's/^/     /'
  "$bin/dpscope" export --format flight-recorder "$dir/fr" "$dir/run.sqlite" > /dev/null
  echo "   flight-recorder dumps: $(cd "$dir/fr" && ls | tr '\n' ' ')(in $dir/fr)"
done
