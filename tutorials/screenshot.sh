#!/usr/bin/env bash
# Takes a tutorial's screenshot, the PNG next to its README: runs the tutorial on 2 ranks (8 for the
# scaling tutorial, 4 for tutorial 20) under `dpscope launch` into a temporary trace directory, then has dpscope-view
# draw the trace headless (--screenshot; under xvfb-run when there is no display) and write the PNG.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: tutorials/screenshot.sh [--bin DIR] [--out PNG] [--keep-traces DIR] NN [-- TUTORIAL ARGS...]
  NN                 the tutorial's number (01 .. 18, 20; 19 is a script with a screenshot of its own)
  --bin DIR          where dpscope, dpscope-view and the tutorials are (default: build/bin)
  --out PNG          where the PNG goes (default: tutorials/NN_topic/screenshot.png)
  --keep-traces DIR  write the traces there and keep them (default: /tmp/dpscope-tutorial-NN,
                     removed afterwards; its path shows in the screenshot's title)
  TUTORIAL ARGS      passed on to the tutorial (e.g. --steps 2)
EOF
  exit 2
}

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build/bin"
out=""
keep=""
number=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --keep-traces) keep="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) [[ -z "$number" ]] || usage; number="$1"; shift ;;
  esac
done
[[ -n "$number" ]] || usage

# Which run each tutorial shows, and with what to compare it (the viewer aligns them on iterations);
# the tutorials whose README runs them on an emulated link get the same link here. The timing
# lessons are drawn on the cluster clock (clock=cluster: docs/cluster-clock.md), so the picture
# shows the cluster they teach about, not this machine's scheduler.
link=()
clock=measured
ranks=2
case "$number" in
  01) folder=01_collectives;         view=(primer/run.sqlite --iteration 0 --step 7)
      link=(--link-gbps 2 --link-latency-us 500) ;;
  02) folder=02_naive_dp;            view=(after-backward/run.sqlite --compare hooks/run.sqlite --iteration 4)
      link=(--link-gbps 1 --link-latency-us 50); clock=cluster ;;
  03) folder=03_toy_ddp;            view=(run.sqlite) ;;
  04) folder=04_bucketing;          view=(cap-1mb/run.sqlite --compare cap-25mb/run.sqlite)
      link=(--link-gbps 2 --link-latency-us 50); clock=cluster ;;
  05) folder=05_bucket_rebuild;     view=(by-size-guess/run.sqlite --compare gradient-copy/run.sqlite)
      link=(--link-gbps 2 --link-latency-us 50); clock=cluster ;;
  06) folder=06_unused_parameters;  view=(run.sqlite) ;;
  07) folder=07_no_sync;            view=(no-sync/run.sqlite --compare sync-every-micro-step/run.sqlite)
      link=(--link-gbps 1 --link-latency-us 50); clock=cluster ;;
  08) folder=08_comm_hooks;         view=(allreduce/run.sqlite --compare powersgd/run.sqlite) ;;
  09) folder=09_scaling;             view=(run.sqlite --iteration 4 --fold 1,2,3,4,5,6)
      link=(--link-gbps 0.2 --link-latency-us 50); clock=cluster; ranks=8 ;;
  10) folder=10_fsdp_basics;        view=(per-unit/run.sqlite --compare bucketed/run.sqlite) ;;
  11) folder=11_fsdp_nesting_prefetch; view=(root-only/run.sqlite --compare nested/run.sqlite)
      link=(--link-gbps 4 --link-latency-us 50); clock=cluster ;;
  12) folder=12_zero_stages;        view=(ddp/run.sqlite --compare full-shard/run.sqlite --iteration 2)
      link=(--link-gbps 4 --link-latency-us 50); clock=cluster ;;
  13) folder=13_zero1;               view=(ddp/run.sqlite --compare zero1/run.sqlite --iteration 2)
      link=(--link-gbps 4 --link-latency-us 50); clock=cluster ;;
  14) folder=14_mixed_precision_offload; view=(fp32/run.sqlite --compare bf16/run.sqlite --iteration 4)
      link=(--link-gbps 4 --link-latency-us 50) ;;
  15) folder=15_real_training;      view=(ddp/run.sqlite --compare fsdp/run.sqlite --iteration 150) ;;
  16) folder=16_gpus;               view=(ddp/run.sqlite --compare fsdp/run.sqlite) ;;
  17) folder=17_stragglers;         view=(slow-40ms/run.sqlite --iteration 4)
      link=(--link-gbps 1 --link-latency-us 50); clock=cluster ;;
  18) folder=18_whatif;             view=(cap-1mb/run.sqlite --whatif-cap-mb 25 --whatif-first-bucket-mb 25 --iteration 6 --fold 1)
      link=(--link-gbps 4 --link-latency-us 50); clock=cluster ;;
  20) folder=20_fsdp1_vs_fsdp2;      view=(fsdp1/run.sqlite --compare fsdp2/run.sqlite --iteration 1); ranks=4 ;;
  *) echo "screenshot.sh: no tutorial $number; choose 01 .. 18 or 20" >&2; exit 2 ;;
esac
program="$bin/tutorial-${folder//_/-}"
for tool in "$bin/dpscope" "$bin/dpscope-view" "$program"; do
  [[ -x "$tool" ]] || { echo "screenshot.sh: $tool is missing; build it first (cmake --build build) or pass --bin" >&2; exit 1; }
done
[[ -n "$out" ]] || out="$root/tutorials/$folder/screenshot.png"

if [[ -n "$keep" ]]; then
  traces="$keep"
  mkdir -p "$traces"
else
  traces="${TMPDIR:-/tmp}/dpscope-tutorial-$number"
  rm -rf "$traces"
  mkdir -p "$traces"
  trap 'rm -rf "$traces"' EXIT
fi

"$bin/dpscope" launch -n "$ranks" "${link[@]}" --trace-dir "$traces" -- "$program" "$@" > "$traces/tutorial.log" 2>&1 ||
  { cat "$traces/tutorial.log" >&2; echo "screenshot.sh: tutorial $number failed (output above)" >&2; exit 1; }

# Tutorial 16 writes no trace without a GPU (it says so and exits 0).
[[ -f "$traces/${view[0]}" ]] ||
  { cat "$traces/tutorial.log" >&2; echo "screenshot.sh: tutorial $number wrote no $traces/${view[0]} (output above); tutorial 16 needs CUDA devices" >&2; exit 1; }

args=()
for arg in "${view[@]}"; do
  if [[ "$arg" == *.sqlite ]]; then args+=("$traces/$arg"); else args+=("$arg"); fi
done
viewer=("$bin/dpscope-view" "${args[@]}" --clock "$clock" --screenshot "$out" --frames 30)
if [[ -z "${DISPLAY:-}" ]]; then
  command -v xvfb-run > /dev/null ||
    { echo "screenshot.sh: no display and no xvfb-run; install xvfb (apt-get install xvfb) or run under a display" >&2; exit 1; }
  viewer=(xvfb-run -a -s "-screen 0 1600x1000x24" "${viewer[@]}")
fi
"${viewer[@]}" > /dev/null
echo "screenshot.sh: wrote $out"
