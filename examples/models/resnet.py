#!/usr/bin/env python3
"""A small residual CNN (ResNet-8 class) for Fashion-MNIST, for gradsync.

    /usr/bin/python3 examples/models/resnet.py --out resnet.pt
    build/bin/gradsync local --compare --model=torchscript:resnet.pt --workers 4

A 3x3 stem, three stages of one basic residual block each (16, 32, 64
channels; stride 2 between stages), batch normalisation, global average
pooling and a linear head. 77,754 parameters (304 KiB of gradient per
step) in 29 tensors, and far more compute per parameter than LeNet: the
workload where communication is cheapest next to compute.

Batch-norm running statistics are buffers, kept per rank (gradsync does not
synchronise buffers; rank 0's steer the test accuracy), as
docs/user-guide.md explains.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = nn.Sequential()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(h)) + self.skip(x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.stages = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.stem(x.view(-1, 1, 28, 28))))
        x = self.stages(x)
        return self.head(x.mean(dim=(2, 3)))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="resnet.pt", help="TorchScript file to write")
    ap.add_argument("--seed", type=int, default=0, help="seed of the initial parameters")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    module = torch.jit.script(ResNet())
    module.save(args.out)
    n = sum(p.numel() for p in module.parameters())
    print(f"wrote {args.out}: {n} parameters in {len(list(module.parameters()))} tensors "
          f"({n * 4 / 1024:.0f} KiB of gradient per step)")


if __name__ == "__main__":
    main()
