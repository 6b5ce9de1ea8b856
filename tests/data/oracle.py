"""PyTorch oracle for tests/data: what torch.utils.data and torch's generators give for the cases
the C++ tests ask about. Run with /usr/bin/python3 (torch 1.13). One query as arguments prints one
JSON object; with no arguments every stdin line is a query and each gets one JSON line (one
Python start-up for a whole test). Queries:

  oracle.py sampler N REPLICAS RANK SEED EPOCH SHUFFLE DROP_LAST   -> {"indices": [...], "num_samples", "total_size"}
  oracle.py batches N REPLICAS RANK SEED BATCH STEPS               -> {"batches": [[...], ...], "epochs": [...]}
  oracle.py classification N FEATURES CLASSES SEED                 -> {"x": [...flat], "y": [...]}
  oracle.py sequences N LENGTH VOCAB SEED                          -> {"x": [...flat], "y": [...flat]}
  oracle.py digits PATH                                            -> {"shape", "x_sum", "x_first", "y_head", "y_sum", "y_counts"}
  oracle.py text PATH SEQUENCE                                     -> {"shape", "vocabulary", "x_first", "y_first", "x_last", "y_last", "x_sum", "y_sum"}
"""
import gzip
import json
import struct
import sys

import torch
from torch.utils.data import DataLoader, DistributedSampler


class Range(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def floats(t):
    # Exact: each float32 as its bit pattern.
    return [struct.unpack("<I", struct.pack("<f", v))[0] for v in t.flatten().tolist()]


def answer(argv):
    kind = argv[0]
    if kind == "sampler":
        n, replicas, rank, seed, epoch, shuffle, drop_last = map(int, argv[1:8])
        s = DistributedSampler(Range(n), num_replicas=replicas, rank=rank, shuffle=bool(shuffle),
                               seed=seed, drop_last=bool(drop_last))
        s.set_epoch(epoch)
        out = {"indices": list(iter(s)), "num_samples": s.num_samples, "total_size": s.total_size}
    elif kind == "batches":
        n, replicas, rank, seed, batch, steps = map(int, argv[1:7])
        s = DistributedSampler(Range(n), num_replicas=replicas, rank=rank, shuffle=True, seed=seed,
                               drop_last=False)
        loader = DataLoader(Range(n), batch_size=batch, drop_last=False, sampler=s)
        batches, epochs = [], []
        epoch = 0
        while len(batches) < steps:
            s.set_epoch(epoch)
            for b in loader:
                batches.append(b.tolist())
                epochs.append(epoch)
                if len(batches) == steps:
                    break
            epoch += 1
        out = {"batches": batches, "epochs": epochs}
    elif kind == "classification":
        n, f, c, seed = map(int, argv[1:5])
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, f, generator=g)
        w = torch.randn(f, c, generator=g)
        y = (x @ w).argmax(1)
        out = {"x": floats(x), "y": y.tolist()}
    elif kind == "sequences":
        n, length, vocab, seed = map(int, argv[1:5])
        g = torch.Generator().manual_seed(seed)
        x = torch.randint(vocab, (n, length), generator=g)
        y = x.flip(1)
        out = {"x": x.flatten().tolist(), "y": y.flatten().tolist(), "dtype": str(x.dtype)}
    elif kind == "digits":
        rows = [list(map(int, line.split(","))) for line in gzip.open(argv[1], "rt") if line.strip()]
        t = torch.tensor(rows)
        x = (t[:, :64] / 16).to(torch.float32)
        y = t[:, 64]
        out = {"shape": list(x.shape), "x_sum": float(x.double().sum()),
               "x_first": floats(x[:3]), "x_last": floats(x[-1]), "y_head": y[:20].tolist(),
               "y_sum": int(y.sum()), "y_counts": torch.bincount(y, minlength=10).tolist()}
    elif kind == "text":
        sequence = int(argv[2])
        with gzip.open(argv[1]) as f:
            text = f.read().decode("utf-8")
        chars = sorted(set(text))
        ids = torch.tensor([chars.index(c) for c in text])
        n = (len(ids) - 1) // sequence
        x = ids[:n * sequence].view(n, sequence)
        y = ids[1:n * sequence + 1].view(n, sequence)
        out = {"shape": list(x.shape), "vocabulary": [ord(c) for c in chars],
               "x_first": x[:2].flatten().tolist(), "y_first": y[:2].flatten().tolist(),
               "x_last": x[-1].tolist(), "y_last": y[-1].tolist(), "x_sum": int(x.sum()),
               "y_sum": int(y.sum())}
    else:
        raise SystemExit("unknown oracle kind " + kind)
    return json.dumps(out)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(answer(sys.argv[1:]))
    else:
        for line in sys.stdin:
            if line.strip():
                print(answer(line.split()))
