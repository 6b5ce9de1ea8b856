"""Prints the largest absolute difference between two saved state dicts (same names) as
`max_abs_diff <value> <name>`; exits 1 naming the first name present in only one of them."""
import sys

import torch

a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
if set(a) != set(b):
    print("names differ:", sorted(set(a) ^ set(b)))
    sys.exit(1)
worst, where = 0.0, ""
for name in a:
    if a[name].dtype.is_floating_point:
        d = (a[name].double() - b[name].double()).abs().max().item()
        if d > worst:
            worst, where = d, name
print(f"max_abs_diff {worst:.3e} {where or '-'}")
