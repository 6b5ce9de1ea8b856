"""The oracle for tests/ddp: trains with PyTorch's own DistributedDataParallel (gloo) exactly as
`dpscope train` does — same saved initial parameters, data, DistributedSampler, batches across
epochs, SGD, gradient accumulation under no_sync — and writes the final parameters. With
--single it trains one process on the global batch (every rank's batch together) instead.
With --plans-out, rank 0 also writes DDP's bucket plans as PyTorch built them (plans_of).
Run every rank under `dpscope launch -n N -- /usr/bin/python3 pytorch_ddp.py ...`."""
import argparse
import contextlib
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import models


def batches(dataset, replicas, rank, args):
    sampler = DistributedSampler(dataset, num_replicas=replicas, rank=rank, shuffle=True,
                                 seed=args.seed, drop_last=False)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=False)
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        for batch in loader:
            yield batch
        epoch += 1


def comm_hook(ddp, name):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    if name == "allreduce":
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    elif name == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif name == "bf16":
        # PyTorch allows this hook only with NCCL; the hook itself is backend-neutral, so the
        # oracle registers it the way register_comm_hook does after its check.
        dist._register_comm_hook(ddp.reducer, None, default_hooks.bf16_compress_hook)
    elif name == "powersgd":
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                                            start_powerSGD_iter=2)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)


def bucket_plan(ddp, params):
    """The Reducer's current buckets as parameter indices in slot order (indices into params)."""
    index_of = {p.data_ptr(): i for i, p in enumerate(params)}
    return [[index_of[p.data_ptr()] for p in bucket.parameters()]
            for bucket in ddp.reducer._get_zeros_like_grad_buckets()]


def plans_of(ddp, params, initial, cap_mb):
    """What a test holds dpscope's plans to: the plan the constructor built and the one in use
    at the end (the Reducer's own buckets), DDP's logging data on them, and the plan PyTorch's
    bucketing by size gives for [1 MiB, cap] in reverse registration order (PyTorch <= 1.11's
    first iteration)."""
    logging = ddp._get_ddp_logging_data()
    by_size, _ = dist._compute_bucket_assignment_by_size(
        params, [dist._DEFAULT_FIRST_BUCKET_BYTES, int(cap_mb * 1024 * 1024)], [False] * len(params))
    return {"initial": initial, "final": bucket_plan(ddp, params),
            "by_size": list(reversed(by_size)),
            "logging": {key: logging[key] for key in
                        ("bucket_sizes", "rebuilt_bucket_sizes",
                         "rebuilt_per_bucket_param_indices", "has_rebuilt_buckets")
                        if key in logging}}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp")
    p.add_argument("--hidden", type=int, help="default: the model's (models.DEFAULTS)")
    p.add_argument("--layers", type=int, help="default: the model's")
    p.add_argument("--heads", type=int, help="gpt; default: the model's")
    p.add_argument("--seq", type=int, help="gpt, transformer; default: the model's")
    p.add_argument("--data", default="synthetic")
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--bucket-cap-mb", type=float, default=25)
    p.add_argument("--find-unused-parameters", action="store_true")
    p.add_argument("--gradient-as-bucket-view", action="store_true")
    p.add_argument("--static-graph", action="store_true")
    p.add_argument("--no-broadcast-buffers", action="store_true")
    p.add_argument("--comm-hook", default="none")
    p.add_argument("--single", type=int, default=0, help="world size to emulate in one process")
    p.add_argument("--digits", required=True)
    p.add_argument("--text", help="--data text's file (default: models.TEXT, data/opticks.txt.gz)")
    p.add_argument("--init", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--plans-out", help="rank 0 writes the bucket plans here (JSON)")
    args = p.parse_args()
    torch.set_num_threads(1)

    x, y = models.load_data(args, args.digits)
    dataset = TensorDataset(x, y)
    model = models.make_model(args, x.shape[1] if x.dim() == 2 else 0)
    model.load_state_dict(torch.load(args.init))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    if args.single:
        streams = [batches(dataset, args.single, r, args) for r in range(args.single)]
        for _ in range(args.steps):
            opt.zero_grad()
            for _ in range(args.grad_accum):
                parts = [next(s) for s in streams]
                bx = torch.cat([b[0] for b in parts])
                by = torch.cat([b[1] for b in parts])
                loss = models.loss_of(model(bx), by) / args.grad_accum
                loss.backward()
            opt.step()
        torch.save(dict(model.state_dict()), args.out)
        return

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb,
              find_unused_parameters=args.find_unused_parameters,
              gradient_as_bucket_view=args.gradient_as_bucket_view,
              static_graph=args.static_graph,
              broadcast_buffers=not args.no_broadcast_buffers)
    params = [p for p in model.parameters() if p.requires_grad]
    initial_plan = bucket_plan(ddp, params)
    comm_hook(ddp, args.comm_hook)
    stream = batches(dataset, world, rank, args)
    for _ in range(args.steps):
        opt.zero_grad()
        for micro in range(args.grad_accum):
            bx, by = next(stream)
            sync = micro + 1 == args.grad_accum
            with (contextlib.nullcontext() if sync else ddp.no_sync()):
                loss = models.loss_of(ddp(bx), by) / args.grad_accum
                loss.backward()
        opt.step()
    if rank == 0:
        torch.save(dict(model.state_dict()), args.out)
        if args.plans_out:
            with open(args.plans_out, "w") as f:
                json.dump(plans_of(ddp, params, initial_plan, args.bucket_cap_mb), f)
    dist.barrier()
    # PyTorch 1.13's gloo sometimes aborts or hangs tearing down after a comm hook; everything
    # is written, so leave without the teardown.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
