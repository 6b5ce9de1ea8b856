"""PyTorch's own bucket assignment for tests/ddp/test_bucket_assignment: each stdin line is a case
`{"numel": [...], "dtype": [...], "limits": [...], "sparse": [...], "indices": [...]}`; each gets
one line `{"buckets": [[...]], "limits": [...]}` from torch.distributed's
_compute_bucket_assignment_by_size. Run with /usr/bin/python3 (torch 1.13)."""
import json
import sys

import torch
import torch.distributed as dist

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16}

for line in sys.stdin:
    case = json.loads(line)
    tensors = [torch.empty(n, dtype=DTYPES[d]) for n, d in zip(case["numel"], case["dtype"])]
    buckets, limits = dist._compute_bucket_assignment_by_size(
        tensors, case["limits"], case["sparse"], case["indices"])
    print(json.dumps({"buckets": buckets, "limits": limits}), flush=True)
