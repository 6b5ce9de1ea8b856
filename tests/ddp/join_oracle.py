"""The PyTorch oracle for test_ddp_worker's Join cases: trains ddp_worker's Mlp (same names, same
data formula, same saved initial parameters) with PyTorch's own DistributedDataParallel under
torch.distributed.algorithms.join.Join on gloo, rank r taking 4 + r batches (2 r with "zero"),
and rank 0 writes the final parameters. Run every rank under
`dpscope launch -n N -- /usr/bin/python3 join_oracle.py VARIANT INIT OUT`."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP


# ---- Keep in sync with tests/ddp/ddp_worker.cpp (inputs, targets, key_of, Mlp).
def inputs(rows, cols, key):
    i = torch.arange(rows, dtype=torch.float32).unsqueeze(1)
    j = torch.arange(cols, dtype=torch.float32).unsqueeze(0)
    return torch.sin(0.37 * (i + 1) * (j + 1) + 0.11 * float(key) + 0.05 * i)


def targets(rows, cols, key):
    return torch.cos(inputs(rows, cols, key + 7) * 1.3)


class Mlp(torch.nn.Module):
    def __init__(self, unused):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 16)
        self.fc3 = torch.nn.Linear(16, 4)
        if unused:
            self.idle = torch.nn.Linear(16, 16)

    def forward(self, key):
        h = torch.relu(self.fc1(inputs(6, 8, key)))
        return self.fc3(torch.relu(self.fc2(h)))
# ----


def main():
    variant, init, out = sys.argv[1:4]
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = Mlp(variant == "unused")
    model.load_state_dict(torch.load(init))
    ddp = DDP(model, find_unused_parameters=variant == "unused", bucket_cap_mb=1024 / 2**20)
    if variant == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = 2 * rank if variant == "zero" else 4 + rank
    with Join([ddp]):
        for it in range(batches):
            optimizer.zero_grad(set_to_none=True)
            key = rank * 1000 + it * 10
            out_t = ddp(key)
            F.mse_loss(out_t, targets(out_t.size(0), out_t.size(1), key)).backward()
            optimizer.step()
    if rank == 0:
        torch.save(dict(model.state_dict()), out)
    dist.barrier()
    # PyTorch 1.13's gloo teardown sometimes hangs (seen under load, as in pytorch_ddp.py);
    # everything is written, so leave without it.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
