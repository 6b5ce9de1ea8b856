# Records PyTorch profiler (Kineto) traces of PyTorch's own DDP on the CPU with Gloo, one file per
# rank, for the Kineto import's tests (tests/formats/test_kineto_ddp.cpp, docs/kineto.md). Run with
# the interpreter that has torch (Debian's python3-torch 1.13 here, which writes the older bare-list
# form):
#   /usr/bin/python3 tests/formats/kineto_ddp.py OUT_DIR RANKS [STEPS [BUCKET_CAP_MB]]
# Writes OUT_DIR/rank-<r>.json for each rank (STEPS + 1 ProfilerSteps; DDP's bucket_cap_mb
# BUCKET_CAP_MB, 0.3 by default) and OUT_DIR/ddp.json:
# {"world_size", "steps", "rebuilt_bucket_sizes"} from DDP's own logging data (_get_ddp_logging_data), so a test can
# compare the gloo:all_reduce ops of each profiled step with DDP's bucket count.
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule


def model():
    # Eight Linear layers of about 0.26 MB each: with a 0.3 MB bucket cap (and DDP's 1 MB first
    # bucket) DDP builds several buckets.
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(256, 10))


def run(rank, world, store, out, steps, cap_mb):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    ddp = DDP(model(), bucket_cap_mb=cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    # Two warm-up steps (iteration 0 has one bucket, then DDP rebuilds them), then `steps` + 1
    # profiled: the profiler stops at the end of the last one, which may lose the last all-reduces
    # still closing on Gloo's threads, so the tests leave it out as HTA leaves out the last step.
    sched = schedule(wait=0, warmup=2, active=steps + 1, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched, record_shapes=True) as prof:
        for _ in range(2 + steps + 1):
            x = torch.randn(32, 256, generator=gen)
            y = torch.randint(0, 10, (32,), generator=gen)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
            prof.step()
    prof.export_chrome_trace(os.path.join(out, f"rank-{rank}.json"))
    if rank == 0:
        data = ddp._get_ddp_logging_data()
        sizes = [int(s) for s in str(data.get("rebuilt_bucket_sizes", "")).split(",") if s.strip()]
        with open(os.path.join(out, "ddp.json"), "w") as f:
            json.dump({"world_size": world, "steps": steps, "rebuilt_bucket_sizes": sizes}, f)
    dist.destroy_process_group()


def main():
    out, world = sys.argv[1], int(sys.argv[2])
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    cap_mb = float(sys.argv[4]) if len(sys.argv) > 4 else 0.3
    os.makedirs(out, exist_ok=True)
    # The ranks meet in a FileStore, not on a TCP port: a port found free and handed to the ranks
    # can be taken in between by another program (the suite runs tests side by side).
    with tempfile.TemporaryDirectory() as meeting:
        mp.spawn(run, args=(world, os.path.join(meeting, "store"), out, steps, cap_mb), nprocs=world, join=True)


if __name__ == "__main__":
    main()
