"""PyTorch's own DistributedDataParallel (gloo), timed the way engine/train/trainer.cpp times a
`dpscope train` step, for bench/ddp_vs_pytorch.sh.

One rank; run every rank under the launcher:
    build/bin/dpscope launch -n 2 -- /usr/bin/python3 bench/pytorch_ddp_step.py --steps 60 ...
(/usr/bin/python3: Debian's python3-torch, LibTorch 1.13, the same libblas.so.3 as ours.)

A timed step is what the trainer's loop times, in the same order: take the next batch (rows of the
data set picked by a DistributedSampler, as new tensors), zero_grad, forward through DDP, loss
(mean cross-entropy / grad_accum), backward (DDP's all-reduces), loss.item(), optimizer step.
The model and data are tests/ddp/models.py's twins of engine/models and `dpscope train
--data synthetic`. Rank 0 prints `step_ms <median of steps 3..K>` like `dpscope train`."""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ddp"))
import models  # noqa: E402


def batch_indices(size, replicas, rank, args):
    """Index lists of the batches, epoch after epoch, exactly as the trainer's EpochBatches
    (DataLoader(batch_size, drop_last=False) over DistributedSampler with set_epoch)."""
    sampler = DistributedSampler(range(size), num_replicas=replicas, rank=rank, shuffle=True,
                                 seed=args.seed, drop_last=False)
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        order = list(iter(sampler))
        for begin in range(0, len(order), args.batch_size):
            yield order[begin:begin + args.batch_size]
        epoch += 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--data", default="synthetic")
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--progress-every", type=int, default=20)
    p.add_argument("--bucket-cap-mb", type=float, default=25)
    p.add_argument("--digits", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "..", "data", "digits.csv.gz"))
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = models.load_data(args, args.digits)
    torch.manual_seed(args.seed + 1000 * rank)  # as the trainer; DDP broadcasts rank 0's
    model = models.make_model(args, x.shape[1] if x.dim() == 2 else 0)
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    stream = batch_indices(x.shape[0], world, rank, args)
    grad_accum = 1

    step_ms = []
    for step in range(args.steps):
        start = time.perf_counter()
        idx = torch.tensor(next(stream), dtype=torch.int64)
        bx, by = x.index_select(0, idx), y.index_select(0, idx)
        opt.zero_grad(set_to_none=False)
        loss = models.loss_of(ddp(bx), by) / grad_accum
        loss.backward()
        loss_value = loss.item()
        opt.step()
        ms = (time.perf_counter() - start) * 1e3
        step_ms.append(ms)
        if rank == 0 and args.progress_every > 0 and (
                (step + 1) % args.progress_every == 0 or step + 1 == args.steps):
            print(f"step {step + 1}/{args.steps}  loss {loss_value:.4f}  {ms:.2f} ms", flush=True)

    timed = step_ms[2:] if len(step_ms) >= 3 else step_ms
    dist.barrier()
    print(f"step_ms {statistics.median(timed):.3f}", flush=True)
    # PyTorch 1.13's gloo can hang tearing down; everything is done, so leave without it.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
