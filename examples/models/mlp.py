#!/usr/bin/env python3
"""The built-in MLP (mlp:784-256-128-10) as a TorchScript module.

    /usr/bin/python3 examples/models/mlp.py --out mlp.pt [--widths 784-256-128-10]

nn.Linear keeps its weight as [out, in] row-major followed by its bias, which
is exactly the built-in MLP's flat layout, so gradsync's buckets and PS
partitions cut both the same way. Its job is to show that a TorchScript model
trains like the built-in one (the same accuracy after an epoch, within noise);
the initial parameters differ (PyTorch's init, not gradsync's).
"""
import argparse

import torch
import torch.nn as nn


class Mlp(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.layers = nn.ModuleList(
            [nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:])])

    def forward(self, x):
        n = len(self.layers)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < n:
                x = torch.relu(x)
        return x


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="mlp.pt", help="TorchScript file to write")
    ap.add_argument("--widths", default="784-256-128-10",
                    help="layer widths, input first, as in mlp:784-256-128-10")
    ap.add_argument("--seed", type=int, default=0, help="seed of the initial parameters")
    args = ap.parse_args()
    widths = [int(w) for w in args.widths.split("-")]
    torch.manual_seed(args.seed)
    module = torch.jit.script(Mlp(widths))
    module.save(args.out)
    n = sum(p.numel() for p in module.parameters())
    print(f"wrote {args.out}: {n} parameters ({n * 4 / 1024:.0f} KiB of gradient per step)")


if __name__ == "__main__":
    main()
