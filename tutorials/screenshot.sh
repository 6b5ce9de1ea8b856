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

# Which run each tutorial shows (tutorials/views.sh).
source "$root/tutorials/views.sh"
tutorial_view "$number" || { echo "screenshot.sh: no tutorial $number; choose 01 .. 18 or 20" >&2; exit 2; }
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
