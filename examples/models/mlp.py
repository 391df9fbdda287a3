#!/usr/bin/env python3
"""The built-in MLP (mlp:784-256-128-10) as a TorchScript module.

    /usr/bin/python3 examples/models/mlp.py --out mlp.pt [--widths 784-256-128-10]

nn.Linear keeps its weight as [out, in] row-major followed by its bias, which
is exactly the built-in MLP's flat layout, so gradsync's buckets and PS
partitions cut both the same way. Its job is to show that a TorchScript model
trains like the built-in one: with --init=gradsync the module starts from
exactly the parameters the built-in MLP draws for --seed (He-uniform from
std::mt19937_64, worker/model/mlp.cc), so both follow the same trajectory up
to floating-point summation order. --init=torch keeps PyTorch's own init
(kaiming-uniform with a = sqrt(5), a smaller scale), which ends one epoch
about 0.01 lower.
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


class Mt19937_64:
    """std::mt19937_64, so that Python draws what the C++ MLP draws."""

    MASK = (1 << 64) - 1

    def __init__(self, seed):
        self.mt = [seed & self.MASK]
        for i in range(1, 312):
            p = self.mt[-1]
            self.mt.append((6364136223846793005 * (p ^ (p >> 62)) + i) & self.MASK)
        self.i = 312

    def __call__(self):
        mt = self.mt
        if self.i >= 312:
            for i in range(312):
                x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
                mt[i] = mt[(i + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            self.i = 0
        y = mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return y ^ (y >> 43)


def gradsync_init(model, seed):
    """The built-in MLP's Mlp::InitParams: per layer, weights U(-a, a) with
    a = sqrt(6 / fan_in) from the top 24 bits of each draw, biases zero."""
    rng = Mt19937_64(seed)
    with torch.no_grad():
        for layer in model.layers:
            out, fan_in = layer.weight.shape
            a = torch.tensor(6.0 / fan_in, dtype=torch.float64).sqrt().float()
            u = torch.tensor([rng() >> 40 for _ in range(out * fan_in)], dtype=torch.float64)
            u = (u * (1.0 / 16777216.0)).float()
            layer.weight.copy_(((2.0 * u - 1.0) * a).view(out, fan_in))
            layer.bias.zero_()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="mlp.pt", help="TorchScript file to write")
    ap.add_argument("--widths", default="784-256-128-10",
                    help="layer widths, input first, as in mlp:784-256-128-10")
    ap.add_argument("--seed", type=int, default=1,
                    help="seed of the initial parameters (--init=gradsync: the job's --seed "
                    "whose parameters to start from)")
    ap.add_argument("--init", choices=["torch", "gradsync"], default="torch",
                    help="PyTorch's init, or exactly the built-in MLP's for --seed")
    args = ap.parse_args()
    widths = [int(w) for w in args.widths.split("-")]
    torch.manual_seed(args.seed)
    model = Mlp(widths)
    if args.init == "gradsync":
        gradsync_init(model, args.seed)
    module = torch.jit.script(model)
    module.save(args.out)
    n = sum(p.numel() for p in module.parameters())
    print(f"wrote {args.out}: {n} parameters ({n * 4 / 1024:.0f} KiB of gradient per step)")


if __name__ == "__main__":
    main()
