#!/usr/bin/env python3
"""Another rank of a PyTorch profiler trace whose clock is off by a known amount: every time moved by
OFFSET_US, every NCCL kernel's end jittered by up to JITTER_US (seeded), distributedInfo.rank set to RANK
(the object form; PyTorch 1.13's bare list has no distributedInfo). What tests/formats/test_kineto_align.cpp
and test_kineto_ddp.cpp align back, the truth known by construction. Reads and writes .json or .json.gz.

    kineto_shift.py IN OUT RANK OFFSET_US JITTER_US SEED
"""
import gzip
import json
import random
import sys


def main():
    source, out, rank, offset_us, jitter_us, seed = sys.argv[1:7]
    rank, offset_us, jitter_us = int(rank), float(offset_us), float(jitter_us)
    rng = random.Random(int(seed))
    with (gzip.open(source, "rt") if source.endswith(".gz") else open(source)) as f:
        trace = json.load(f)
    if isinstance(trace, dict):
        trace.setdefault("distributedInfo", {})["rank"] = rank
    for event in trace["traceEvents"] if isinstance(trace, dict) else trace:
        if "ts" in event:
            event["ts"] = event["ts"] + offset_us
        if event.get("cat") == "kernel" and event.get("name", "").startswith("nccl") and "dur" in event:
            event["dur"] = max(0.0, event["dur"] + rng.uniform(-jitter_us, jitter_us))
    with (gzip.open(out, "wt") if out.endswith(".gz") else open(out, "w")) as f:
        json.dump(trace, f)


if __name__ == "__main__":
    main()
