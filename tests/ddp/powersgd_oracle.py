# PowerSGD oracle for test_comm_hooks: runs PyTorch's own powerSGD_hook (one rank per process,
# under torchrun, gloo backend) on the deterministic buckets comm_hooks_worker uses, and writes
# every bucket's buffer after each hook call to OUT/powersgd_rank<RANK>.f32 (raw float32).
#
#   /usr/bin/torchrun --standalone --nproc_per_node N --redirects 1 --tee 1 \
#       tests/ddp/powersgd_oracle.py OUT
#
# Keep LAYOUT, CONFIGS and value() identical to comm_hooks_worker.cpp.
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

# Buckets of gradient shapes, in bucket order; the last bucket has no compressible tensor.
LAYOUT = [
    [(8, 3, 3, 3), (8,), (16, 10), (2, 2), (5,), (16, 10)],
    [(32, 20), (4, 4, 2, 2), (3, 50), (32, 20)],
    [(7,), (1, 30), (20, 1)],
]

# (matrix_approximation_rank, start_powerSGD_iter, min_compression_rate, use_error_feedback,
#  warm_start, random_seed, iterations)
CONFIGS = [
    (1, 2, 2.0, True, True, 0, 5),
    (2, 3, 2.0, True, False, 7, 5),
    (4, 2, 1.0, False, True, 42, 4),
]


def value(config, iteration, bucket, rank, n):
    """Element i of a rank's bucket: an integer hash mapped to [-1.001, 1.001], as float32."""
    i = np.arange(n, dtype=np.int64)
    h = (i * i * 31 + i * 17 + rank * 1009 + iteration * 7919 + bucket * 104729
         + config * 1299709) % 2003
    return ((h - 1001).astype(np.float64) / 1000.0).astype(np.float32)


class Bucket:
    """Duck-typed dist.GradBucket: what powerSGD_hook calls on it."""

    def __init__(self, index, buffer, shapes, is_last):
        self._index = index
        self._buffer = buffer
        self._is_last = is_last
        self._gradients = []
        offset = 0
        for shape in shapes:
            numel = int(np.prod(shape))
            self._gradients.append(buffer[offset:offset + numel].view(shape))
            offset += numel

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer

    def set_buffer(self, buffer):
        self._buffer = buffer

    def is_last(self):
        return self._is_last

    def gradients(self):
        return self._gradients

    def parameters(self):
        return [torch.nn.Parameter(g.detach().clone()) for g in self._gradients]


def main():
    out_dir = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    outputs = []
    for c, (approx_rank, start, min_rate, error_feedback, warm_start, seed, iterations) in \
            enumerate(CONFIGS):
        state = powersgd.PowerSGDState(
            process_group=None, matrix_approximation_rank=approx_rank,
            start_powerSGD_iter=start, min_compression_rate=min_rate,
            use_error_feedback=error_feedback, warm_start=warm_start, random_seed=seed)
        for it in range(iterations):
            for b, shapes in enumerate(LAYOUT):
                numel = sum(int(np.prod(s)) for s in shapes)
                buffer = torch.from_numpy(value(c, it, b, rank, numel))
                bucket = Bucket(b, buffer, shapes, b == len(LAYOUT) - 1)
                # One bucket at a time: PyTorch issues P's all-reduce from a future callback,
                # which could interleave differently on different ranks with later buckets.
                result = powersgd.powerSGD_hook(state, bucket).wait()
                outputs.append(result.detach().clone().numpy())
    np.concatenate(outputs).astype("<f4").tofile(
        os.path.join(out_dir, "powersgd_rank%d.f32" % rank))
    dist.barrier()
    # Tearing the gloo group down after futures with callbacks sometimes aborts in PyTorch 1.13
    # ("terminate called without an active exception"); every result is written, so leave now.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
