#!/usr/bin/env bash
# Remakes the pictures in this folder from fresh runs, with the viewer's headless mode (under
# xvfb-run when there is no display): the README's first picture (one step of a 4-rank DDP
# backward on an emulated 4 Gb/s link, narrated, its flows drawn) and the same at x2 in the
# projector theme, the demo's DDP/FSDP comparison and the viewer on a 4-rank synthetic run. The
# step's pictures and the demo's are lessons about time and are drawn on the cluster clock
# (docs/cluster-clock.md), as the demo draws its own.
# Usage: docs/screenshots/regenerate.sh [BUILD_DIR]
set -euo pipefail
if [ -z "${DISPLAY:-}" ]; then
  exec xvfb-run -a -s "-screen 0 1600x1000x24 -noreset" "$0" "$@"
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "${1:-$root/build}" && pwd)/bin
out=$root/docs/screenshots
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for tool in dpscope dpscope-view; do
  [ -x "$bin/$tool" ] || { echo "regenerate.sh: $bin/$tool is missing; build first (cmake --build build)" >&2; exit 1; }
done

# 1. One step of backward: 6 layers of 512 in 1 MiB buckets on 4 ranks. Step 3 of iteration 5 is
#    the gradient that fills bucket 0; the flows lead to its all-reduce on every rank.
"$bin/dpscope" launch -n 4 --link-gbps 4 --link-latency-us 50 --trace-dir "$work/step" -- \
  "$bin/dpscope" train --model mlp --hidden 512 --layers 6 --bucket-cap-mb 1 --steps 8 \
  --batch-size 128 --progress-every 0 > "$work/step.log" 2>&1 ||
  { cat "$work/step.log" >&2; exit 1; }
"$bin/dpscope-view" "$work/step/run.sqlite" --clock cluster --screenshot "$out/ddp-step.png" \
  --frames 3 --iteration 5 --step 3 > /dev/null
#    The same moment as a class sees it projected: twice the text, the projector theme, 1600x1000.
"$bin/dpscope-view" "$work/step/run.sqlite" --clock cluster --screenshot "$out/projector-x2.png" \
  --size 1600x1000 --font-scale 2 --theme projector --iteration 5 --step 3 > /dev/null

# 2. The demo's comparison (scripts/demo's runs).
env -u DISPLAY "$bin/dpscope" demo --out "$work/demo" > "$work/demo.log" 2>&1 ||
  { cat "$work/demo.log" >&2; exit 1; }
cp "$work/demo/compare.png" "$out/demo-compare.png"

# 3. The viewer on a 4-rank synthetic run, one iteration with a step narrated.
"$bin/dpscope" synth --events 200000 --ranks 4 --out "$work/synth.sqlite" > /dev/null
"$bin/dpscope-view" "$work/synth.sqlite" --screenshot "$out/viewer.png" --frames 3 \
  --iteration 20 --step 6 > /dev/null
echo "regenerate.sh: wrote $out/ddp-step.png, projector-x2.png, demo-compare.png, viewer.png"
