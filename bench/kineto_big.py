# Makes a big PyTorch profiler (Kineto) trace for bench/kineto_import.sh: nccl_data's events
# (tests/data/kineto) repeated COPIES times, each copy shifted in time past the previous one, its
# ProfilerSteps renumbered and its correlation and External ids offset, so that the copies read as
# consecutive steps of one run. Written event by event (never the whole file in memory):
#   /usr/bin/python3 bench/kineto_big.py OUT.json COPIES
import gzip
import json
import os
import re
import sys

SOURCE = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "kineto", "nccl_data.json.gz")
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def shifted(event, k, period, steps):
    e = dict(event)
    if "ts" in e and isinstance(e["ts"], (int, float)):
        e["ts"] = round(e["ts"] + k * period, 3)
    m = STEP.match(e.get("name", ""))
    if m:
        e["name"] = "ProfilerStep#%d" % (int(m.group(1)) + k * steps)
    if isinstance(e.get("args"), dict):
        args = dict(e["args"])
        for key in ("correlation", "External id"):
            if isinstance(args.get(key), int):
                args[key] += k * 10_000_000
        e["args"] = args
    if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
        e["id"] += k * 10_000_000
    return e


def main():
    out, copies = sys.argv[1], int(sys.argv[2])
    with gzip.open(SOURCE, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    timed = [e for e in events if e.get("ph") == "X"]
    begin = min(e["ts"] for e in timed)
    end = max(e["ts"] + e.get("dur", 0) for e in timed)
    period = end - begin + 1000.0
    steps = sum(1 for e in events if STEP.match(e.get("name", "")))
    head = {k: v for k, v in trace.items() if k != "traceEvents"}
    with open(out, "w") as f:
        f.write(json.dumps(head)[:-1] + ', "traceEvents": [\n')
        first = True
        for k in range(copies):
            for e in events:
                if k > 0 and e.get("ph") == "M":
                    continue
                f.write(("" if first else ",\n") + json.dumps(shifted(e, k, period, steps)))
                first = False
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
