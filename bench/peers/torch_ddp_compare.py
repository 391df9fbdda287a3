#!/usr/bin/env python3
"""gradsync allreduce-sync against PyTorch DDP on the same TorchScript model, CPU.

    /usr/bin/python3 bench/peers/torch_ddp_compare.py --model lenet.pt --ranks 2,4
    /usr/bin/python3 bench/peers/torch_ddp_compare.py --model charlm.pt --data corpus.pt

Both sides train the same scripted module (DDP wraps the loaded
ScriptModule), with the same per-rank batch, Adam (lr 0.001), the same data
(Fashion-MNIST, or the tensor file given with --data) and the same intra-op
threads per rank as gradsync gives its workers on this machine (the cores
left after one per rank for communication, at least 1). DDP uses the gloo
backend, one process per rank, default buckets (25 MB, small first bucket);
its timed window starts after --warmup steps. gradsync runs
`gradsync local --strategy=allreduce --mode=sync` for the same number of steps
and its samples/s is the job result's (slowest rank's training-loop wall,
warm-up steps included, so the comparison leans against gradsync).

Prints one row per world size and "ratio gradsync/ddp" (samples/s; > 1 is
faster), and gradsync's overlap: its step time over the longer of its
compute and its communication per step (1.0: the shorter is hidden
entirely; the sum of both, when nothing overlaps, is up to 2.0). --json
writes the rows.
"""
import argparse
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fashion_mnist(data_dir):
    with gzip.open(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), "rb") as f:
        _, n, rows, cols = struct.unpack(">IIII", f.read(16))
        x = np.frombuffer(f.read(), dtype=np.uint8).reshape(n, rows * cols)
    with gzip.open(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), "rb") as f:
        f.read(8)
        y = np.frombuffer(f.read(), dtype=np.uint8)
    return torch.from_numpy(x.astype(np.float32) / 255.0), torch.from_numpy(y.astype(np.int64))


def load_data(args):
    if args.data:
        d = torch.load(args.data)
        return d["x"].reshape(len(d["x"]), -1).float(), d["y"].long()
    return fashion_mnist(args.data_dir)


def threads_per_rank(world):
    cores = os.cpu_count() or 1
    return max(1, (cores - world) // world)


def ddp_rank(rank, world, args, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(threads_per_rank(world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x, y = load_data(args)
    model = DDP(torch.jit.load(args.model))
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    per_step = world * args.batch
    steps_per_epoch = len(y) // per_step

    def step(s):
        first = (s % steps_per_epoch) * per_step + rank * args.batch
        xb, yb = x[first:first + args.batch], y[first:first + args.batch]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.item()

    for s in range(args.warmup):
        step(s)
    dist.barrier()
    start = time.perf_counter()
    for s in range(args.steps):
        step(args.warmup + s)
    wall = time.perf_counter() - start
    walls = [None] * world
    dist.all_gather_object(walls, wall)
    if rank == 0:
        out.put(world * args.batch * args.steps / max(walls))
    dist.destroy_process_group()


def ddp_samples_per_second(world, args, port):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=ddp_rank, args=(r, world, args, port, out))
             for r in range(world)]
    for p in procs:
        p.start()
    result = out.get(timeout=args.timeout)
    for p in procs:
        p.join(timeout=args.timeout)
    return result


def gradsync_samples_per_second(world, args):
    with tempfile.TemporaryDirectory() as tmp:
        results = os.path.join(tmp, "r.json")
        cmd = [args.gradsync, "local", "--workers", str(world), "--strategy=allreduce",
               "--mode=sync", "--autotune=false", f"--model=torchscript:{args.model}",
               f"--steps={args.warmup + args.steps}", f"--batch_size={args.batch}",
               "--optimizer=adam", "--lr=0.001", f"--results={results}"]
        if args.data:
            cmd.append(f"--data=tensors:{args.data}")
        else:
            cmd.append(f"--data_dir={args.data_dir}")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=args.timeout)
        with open(results) as f:
            r = json.load(f)
        job = r[-1] if isinstance(r, list) else r  # one job: one object
        return float(job["samples_per_second"]), job


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="TorchScript file")
    ap.add_argument("--data", default="", help="tensor data file (default: Fashion-MNIST)")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--ranks", default="2,4", help="world sizes, comma-separated")
    ap.add_argument("--batch", type=int, default=32, help="per rank")
    ap.add_argument("--steps", type=int, default=200, help="timed steps")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--gradsync", default=os.path.join(ROOT, "build", "bin", "gradsync"))
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--json", default="", help="write the rows here")
    args = ap.parse_args()
    rows = []
    print(f"model {args.model}, data {args.data or 'fashion-mnist'}, batch {args.batch}/rank, "
          f"{args.steps} steps, {os.cpu_count()} cores")
    print(f"{'ranks':>5} {'threads':>7} {'ddp samples/s':>14} {'gradsync samples/s':>19} "
          f"{'ratio':>6} {'overlap':>8}")
    for i, world in enumerate(int(w) for w in args.ranks.split(",")):
        ddp = ddp_samples_per_second(world, args, 29600 + 10 * i)
        ours, result = gradsync_samples_per_second(world, args)
        # Overlap: gradsync's step time against the longer of its compute
        # and its communication per step (1.0 = one hides the other fully).
        steps = max(1, result["steps"])
        step_s = result["global_batch"] / ours
        overlap = step_s / max(result["compute_seconds"] / steps,
                               result["comm_seconds"] / steps)
        rows.append({"ranks": world, "threads_per_rank": threads_per_rank(world),
                     "ddp_samples_per_second": ddp, "gradsync_samples_per_second": ours,
                     "ratio": ours / ddp, "overlap": overlap, "gradsync_result": result})
        print(f"{world:>5} {threads_per_rank(world):>7} {ddp:>14.0f} {ours:>19.0f} "
              f"{ours / ddp:>6.2f} {overlap:>8.2f}")
        sys.stdout.flush()
    print("ratio gradsync/ddp: " + ", ".join(f"N={r['ranks']} {r['ratio']:.2f}" for r in rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
