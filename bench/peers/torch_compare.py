#!/usr/bin/env python3
"""PyTorch baseline for gradsync's GPU throughput (issue: CUDA backend).

Same model (MLP widths), batch per worker, optimizer and data (Fashion-MNIST
IDX .gz) as a gradsync job, on the same GPU:
  single : one process, batch B
  ddp    : N processes on one GPU, DistributedDataParallel with the gloo
           backend (gradients cross the CPU like gradsync's), batch B each
Prints one JSON object per configuration: samples/s over the timed steps.

  python3 bench/peers/torch_compare.py --data-dir DIR --widths 784-256-128-10 \
      --batch-size 32 --steps 300 --workers 4
Compare with:
  gradsync local --device=cuda --workers 1|4 --strategy=allreduce --mode=sync \
      --batch-size 32 --steps 300 --results=r.json   (samples_per_second)
"""
import argparse
import gzip
import json
import os
import struct
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def load_images(path):
    with gzip.open(path, "rb") as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 0x803, path
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(n, rows * cols)


def load_labels(path):
    with gzip.open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        assert magic == 0x801, path
        return np.frombuffer(f.read(), dtype=np.uint8)


def make_model(widths):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def train(rank, world, args, result_q=None):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if world > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("gloo", rank=rank, world_size=world)
    dev = torch.device("cuda", args.gpu)
    images = load_images(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz"))
    labels = load_labels(os.path.join(args.data_dir, "train-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.astype(np.float32) / 255.0)
    y = torch.from_numpy(labels.astype(np.int64))
    widths = [int(w) for w in args.widths.split("-")]
    torch.manual_seed(args.seed)
    model = make_model(widths).to(dev)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu], bucket_cap_mb=25)
    opt = (torch.optim.Adam(model.parameters(), lr=args.lr) if args.optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum))
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(args.seed)
    perm = torch.randperm(x.shape[0], generator=g)
    B = args.batch_size

    def step(i):
        j = (i * world + rank) * B % (x.shape[0] - B)
        idx = perm[j:j + B]
        xb = x[idx].pin_memory().to(dev, non_blocking=True)
        yb = y[idx].pin_memory().to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss
    for i in range(args.warmup):
        step(i)
    torch.cuda.synchronize(dev)
    if world > 1:
        dist.barrier()
    t0 = time.perf_counter()
    for i in range(args.steps):
        loss = step(args.warmup + i)
    torch.cuda.synchronize(dev)
    if world > 1:
        dist.barrier()
    secs = time.perf_counter() - t0
    if rank == 0:
        res = {"config": "ddp-gloo" if world > 1 else "single", "workers": world,
               "widths": args.widths, "batch_size": B, "steps": args.steps,
               "seconds": secs, "samples_per_second": args.steps * B * world / secs,
               "final_loss": float(loss), "gpu": torch.cuda.get_device_name(dev)}
        print(json.dumps(res), flush=True)
    if world > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--widths", default="784-256-128-10")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--optimizer", default="adam", choices=["adam", "sgd"])
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--only", choices=["single", "ddp"], default=None)
    args = p.parse_args()
    if args.only in (None, "single"):
        train(0, 1, args)
    if args.only in (None, "ddp") and args.workers > 1:
        mp.spawn(train, args=(args.workers, args), nprocs=args.workers, join=True)


if __name__ == "__main__":
    main()
