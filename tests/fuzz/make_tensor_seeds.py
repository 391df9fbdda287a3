"""Writes the seed corpus of fuzz_tensor_data: small real torch.save files.

Run with Debian's python3-torch from the checkout's root:
  /usr/bin/python3 tests/fuzz/make_tensor_seeds.py tests/fuzz/corpus/fuzz_tensor_data
"""
import argparse
import os

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="directory to write seed-* files into")
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(6, 3)
    seeds = {
        "split": {"x": x, "y": torch.tensor([0, 1, 2, 1, 0, 2]),
                  "x_test": torch.randn(2, 3), "y_test": torch.tensor([1, 0])},
        "held-out": {"x": torch.randint(0, 9, (5, 2, 2), dtype=torch.uint8),
                     "y": torch.tensor([3, 1, 4, 1, 5], dtype=torch.int32)},
        "tokens": {"x": torch.arange(8, dtype=torch.int64).reshape(4, 2),
                   "y": torch.tensor([7, 6, 5, 4], dtype=torch.int16)},
        "bad-lengths": {"x": torch.randn(3, 2), "y": torch.tensor([0, 1])},
        "float-labels": {"x": torch.randn(2, 2), "y": torch.tensor([0.5, 1.0])},
        "half": {"x": torch.randn(3, 4).half(), "y": torch.tensor([0, 1, 1])},
    }
    for name, d in seeds.items():
        torch.save(d, os.path.join(out, "seed-" + name))
    torch.save([x], os.path.join(out, "seed-list"))


if __name__ == "__main__":
    main()
