#!/usr/bin/env python3
"""LeNet-5-class CNN for Fashion-MNIST, exported as TorchScript for gradsync.

    /usr/bin/python3 examples/models/lenet.py --out lenet.pt
    build/bin/gradsync local --compare --model=torchscript:lenet.pt --workers 4

The module takes a batch of flattened 28x28 images (float32 [B, 784], as
gradsync hands every data set to a model) and returns 10 class logits.
61,706 parameters (241 KiB of gradient per step): much compute per byte of
gradient, ten small tensors. Measured (2026-11-29, 2 cores): `local --compare
--workers 4 --epochs 3 --lr=0.003` (Adam, batch 32 per worker) reaches test
accuracy 0.882 in allreduce-sync and 0.881-0.882 in allreduce-async (weight
prediction on, the default; 0.867-0.872 with --weight_prediction=off),
0.877-0.884 in ps-sync and 0.872-0.882 in ps-async (seeds 1-4; one seed
of allreduce-sync, 4, ended 0.871); with the default lr 0.001,
0.864 / 0.863 sync.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = x.view(-1, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="lenet.pt", help="TorchScript file to write")
    ap.add_argument("--seed", type=int, default=0,
                    help="seed of the initial parameters (every rank starts from the file's)")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    module = torch.jit.script(LeNet())
    module.save(args.out)
    n = sum(p.numel() for p in module.parameters())
    print(f"wrote {args.out}: {n} parameters ({n * 4 / 1024:.0f} KiB of gradient per step)")


if __name__ == "__main__":
    main()
