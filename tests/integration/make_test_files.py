#!/usr/bin/env python3
"""The TorchScript modules and tensors files of the integration tests
(tests/integration/torchscript_integration_test.cc), made at build time by
one python3 (Debian's, with torch): each start of python3 imports torch,
about 1.5 s, and the tests used to start fifteen.

  /usr/bin/python3 tests/integration/make_test_files.py OUTDIR

Writes into OUTDIR:
  mlp_W.pt        examples/models/mlp.py's module of widths W (torch's init,
                  seed 1), for each W in WIDTHS;
  mlp_gradsync_init_seed1.pt
                  the default MLP started from the built-in MLP's parameters
                  for seed 1 (mlp.py --init=gradsync --seed=1);
  nan.pt, swaps.pt, spins.pt, hog.pt, crash.pt
                  hostile modules (issue 51), each described below;
  blobs_seed3.pt, blobs_seed4.pt, ok_data.pt
                  tensors files: 4 classes a linear map of 20 features
                  separates (6,000 and 3,000 samples), and a tiny valid one;
then OUTDIR/.made last, so a half-made directory is never taken for done.
"""
import os
import sys

import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "models"))
import mlp  # noqa: E402

WIDTHS = ["784-32-10", "20-32-4", "784-10", "20-10", "784-16-10",
          "784-2048-2048-2048-10", "784-64-64-10", "4-3", "784-8-10"]


class Nan(nn.Module):  # its loss is nan from the first step
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 10)

    def forward(self, x):
        return self.fc(x) * float("nan")


class Swaps(nn.Module):  # swaps its parameter for a larger tensor past the dry run
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(784, 10))
        self.n = 0

    def forward(self, x):
        self.n += 1
        if self.n > 1:
            with torch.no_grad():
                self.w.set_(torch.zeros(2000, 100))
        return x @ self.w[:784, :10]


class Spins(nn.Module):  # never returns from its 4th forward on
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 10)
        self.n = 0

    def forward(self, x):
        self.n += 1
        while self.n > 3:
            self.n += 1
        return self.fc(x)


class Hog(nn.Module):  # takes 1 GiB once past the dry run
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 10)
        self.n = 0

    def forward(self, x):
        self.n += 1
        if self.n > 1:
            x = x + torch.zeros(1 << 28, 1).sum()
        return self.fc(x)


class Crash(nn.Module):  # once past the dry run, reads 2^40 floats past its tensor
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 10)
        self.n = 0

    def forward(self, x):
        self.n += 1
        if self.n > 1:
            x = x + torch.ops.aten._reshape_alias(x, [2], [1 << 40]).sum()
        return self.fc(x)


def linear_classes(seed, n):
    torch.manual_seed(seed)
    x = torch.randn(n, 20)
    w = torch.randn(20, 4)
    return {"x": x, "y": (x @ w).argmax(1)}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    made = os.path.join(out, ".made")
    if os.path.exists(made):
        os.remove(made)

    def save(module, name):
        torch.jit.script(module).save(os.path.join(out, name))

    for w in WIDTHS:
        torch.manual_seed(1)  # as mlp.py's default --seed
        save(mlp.Mlp([int(v) for v in w.split("-")]), "mlp_%s.pt" % w)
    torch.manual_seed(1)
    same = mlp.Mlp([784, 256, 128, 10])
    mlp.gradsync_init(same, 1)
    save(same, "mlp_gradsync_init_seed1.pt")
    for cls in (Nan, Swaps, Spins, Hog, Crash):
        save(cls(), cls.__name__.lower() + ".pt")
    torch.save(linear_classes(3, 6000), os.path.join(out, "blobs_seed3.pt"))
    torch.save(linear_classes(4, 3000), os.path.join(out, "blobs_seed4.pt"))
    torch.save({"x": torch.rand(10, 3), "y": torch.arange(10) % 2},
               os.path.join(out, "ok_data.pt"))
    with open(made, "w") as f:
        f.write("made\n")


if __name__ == "__main__":
    main()
