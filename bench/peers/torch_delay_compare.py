#!/usr/bin/env python3
"""What stale gradients cost LeNet by themselves, in plain PyTorch.

One process, no gradsync: LeNet (examples/models/lenet.py's module) trained
on Fashion-MNIST with Adam and a global batch, where each gradient is
applied `delay` steps after it was computed (ring async's staleness), with
or without weight prediction (the gradient taken at w + delay * the last
update, as gradsync's --weight_prediction does). Prints one JSON row per
(seed, variant) with the test accuracy after --epochs.

    /usr/bin/python3 bench/peers/torch_delay_compare.py --seeds 1,2,3,4
    /usr/bin/python3 bench/peers/torch_delay_compare.py --seeds 3,4 --variants predict,beta1=0.8

Variants: sync (no delay), delayed, predict (delayed with weight
prediction), beta1=B (delayed, Adam's beta1 = B). The lab note
docs/lab-notes/torchscript-models.md ("Third session") reads its output:
about 18 s a run on 2 cores.
"""
import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "models"))
from lenet import LeNet  # noqa: E402


def load(data_dir, name, images):
    with gzip.open(os.path.join(data_dir, name), "rb") as f:
        if images:
            _, n, rows, cols = struct.unpack(">IIII", f.read(16))
            raw = np.frombuffer(f.read(), dtype=np.uint8).reshape(n, rows * cols)
            return torch.tensor(raw.astype(np.float32) / 255)
        _, n = struct.unpack(">II", f.read(8))
        return torch.tensor(np.frombuffer(f.read(), dtype=np.uint8).astype(np.int64))


def train(data, seed, variant, args):
    x, y, x_test, y_test = data
    delay = 0 if variant == "sync" else args.delay
    beta1 = float(variant.split("=")[1]) if variant.startswith("beta1=") else 0.9
    predict = variant == "predict"
    torch.manual_seed(args.model_seed)   # the same initial parameters every run
    model = LeNet()
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=args.lr, betas=(beta1, 0.999))
    order = torch.Generator().manual_seed(seed)
    pending = []
    last = [torch.zeros_like(p) for p in params]   # the last update
    for _ in range(args.epochs):
        perm = torch.randperm(len(x), generator=order)
        for step in range(len(x) // args.batch):
            idx = perm[step * args.batch:(step + 1) * args.batch]
            with torch.no_grad():
                if predict:
                    for p, d in zip(params, last):
                        p.add_(d, alpha=delay)
            model.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            with torch.no_grad():
                if predict:
                    for p, d in zip(params, last):
                        p.sub_(d, alpha=delay)
            pending.append([p.grad.clone() for p in params])
            if len(pending) > delay:
                before = [p.detach().clone() for p in params]
                for p, g in zip(params, pending.pop(0)):
                    p.grad = g
                opt.step()
                last = [p.detach() - b for p, b in zip(params, before)]
    with torch.no_grad():
        return (model(x_test).argmax(1) == y_test).float().mean().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--seeds", default="1,2", help="data-order seeds, comma-separated")
    ap.add_argument("--variants", default="sync,delayed,predict",
                    help="sync, delayed, predict, beta1=B; comma-separated")
    ap.add_argument("--delay", type=int, default=1, help="steps a gradient waits")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--batch", type=int, default=128, help="global batch")
    ap.add_argument("--model-seed", type=int, default=0,
                    help="initial parameters (lenet.py's default --seed)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    data = (load(args.data_dir, "train-images-idx3-ubyte.gz", True),
            load(args.data_dir, "train-labels-idx1-ubyte.gz", False),
            load(args.data_dir, "t10k-images-idx3-ubyte.gz", True),
            load(args.data_dir, "t10k-labels-idx1-ubyte.gz", False))
    for seed in (int(s) for s in args.seeds.split(",")):
        for variant in args.variants.split(","):
            acc = train(data, seed, variant, args)
            print(json.dumps({"seed": seed, "variant": variant, "delay": args.delay,
                              "epochs": args.epochs, "test_accuracy": round(acc, 4)}))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
