"""The Python side of the tests' numeric comparisons (tests/torch_oracle.h calls it): for each
pair of saved state dicts (same names), prints `max_abs_diff <value> <name>`, one line a pair in
the order given. Exits 1, naming the file and the tensor, when the names or shapes differ or a
floating-point value is NaN or infinite: such a value would otherwise compare as no difference.
    compare_state.py A B [A2 B2 ...]"""
import sys

import torch


def finite_or_exit(path, name, tensor):
    if not torch.isfinite(tensor).all():
        print(f"non-finite values in {name} of {path}: a NaN or an infinity compares as nothing")
        sys.exit(1)


def max_abs_diff(path_a, path_b):
    a, b = torch.load(path_a), torch.load(path_b)
    if set(a) != set(b):
        print(f"names differ between {path_a} and {path_b}:", sorted(set(a) ^ set(b)))
        sys.exit(1)
    worst, where = 0.0, ""
    for name in a:
        if not a[name].dtype.is_floating_point:
            continue
        if a[name].shape != b[name].shape:
            print(f"{name}: shape {list(a[name].shape)} in {path_a}, {list(b[name].shape)} in {path_b}")
            sys.exit(1)
        finite_or_exit(path_a, name, a[name])
        finite_or_exit(path_b, name, b[name])
        if a[name].numel() == 0:
            continue
        d = (a[name].double() - b[name].double()).abs().max().item()
        if d > worst or not where:
            worst, where = d, name
    return worst, where


if len(sys.argv) < 3 or len(sys.argv) % 2 != 1:
    print("usage: compare_state.py A B [A2 B2 ...] (pairs of state files)")
    sys.exit(2)
for i in range(1, len(sys.argv), 2):
    worst, where = max_abs_diff(sys.argv[i], sys.argv[i + 1])
    print(f"max_abs_diff {worst:.3e} {where or '-'}")
