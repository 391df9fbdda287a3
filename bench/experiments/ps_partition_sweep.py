#!/usr/bin/env python3
"""PS push/pull against its link bound, by model size, with the partition
size a job gets by default and with one it names (issue 52, item 1).

  python3 bench/experiments/ps_partition_sweep.py [--rates=100mbit,1gbit]
      [--sizes=512K,1M,4M,16M,64M] [--workers=4] [--compare=1048576]
      [--limit=BYTES] [--out=DIR] [--build-dir=build]

Needs root (network namespaces). For each rate it brings up an emulated
cluster (bench/experiments/netem-cluster.sh: the coordinator and its PS
shard on h0, one worker on each of h1..hN, every link shaped to the rate by
tbf), runs one `gradsync bench --op=pushpull` job per size and partition
setting (the default pick, then each --compare size), and tears the
cluster down (always). The bound is what the shard's link sets when pushes
and pulls overlap fully, N*K/B, plus two latencies, with alpha and B
measured by the same job (ranks 0-1 ping-pong); `x bound` is time / bound
(one partition cannot overlap, so it needs about 2x). Writes
DIR/ps_partitions.csv and
DIR/ps_partitions.md (a table per rate), and prints the table.

--limit: tbf's queue in bytes on every link (default: netem-cluster.sh's,
burst + 5 ms at the rate, 136 KB at 100 Mbit/s). With a queue that shallow
the N pushes that meet at the shard's port overflow it, and TCP's
retransmission timeouts (200 ms) rather than the partition size decide the
time at 100 Mbit/s; the README of this folder's figures say which queue
they had.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NETEM = os.path.join(HERE, "netem-cluster.sh")
PREFIX = "gspart"
SERVER = "10.77.0.10:50051"


def parse_size(text):
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if mult > 1 else text) * mult


def netem(*args, check=True):
    cmd = ["bash", NETEM, *args]
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def run_bench(args, size, partition, results):
    iters, warmup = (5, 2) if size < (4 << 20) else (3, 1)
    cmd = ["run", f"--prefix={PREFIX}", "0", os.path.join(args.build_dir, "bin", "gradsync"),
           "bench", f"--server={SERVER}", "--op=pushpull", f"--workers={args.workers}",
           "--ps_shards=1", f"--sizes={size}", f"--iters={iters}",
           f"--warmup={warmup}", f"--ps_partition_bytes={partition}",
           f"--results={results}"]
    out = netem(*cmd, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"bench of {size} B (partition {partition}) failed:\n"
                           f"{out.stdout}\n{out.stderr}")
    with open(results) as f:
        j = json.load(f)
    row = j["rows"][0]
    if not row["ok"]:
        raise RuntimeError(f"bench of {size} B failed its check: {row['error']}")
    return row, j


def bound(workers, size, j):
    """N*K/B + 2 alpha: every push into the shard's host and every answer out
    of it, overlapped, at the job's measured B."""
    return workers * size / j["beta_bytes_per_second"] + 2 * j["alpha_seconds"]


def sweep_rate(args, rate, sizes, rows, tmp):
    up = ["up", f"--hosts={args.workers + 1}", f"--rate={rate}", "--start-daemons",
          f"--prefix={PREFIX}", f"--build-dir={args.build_dir}"]
    if args.limit:
        up.append(f"--limit={args.limit}")
    netem("down", f"--prefix={PREFIX}", check=False)
    out = netem(*up, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"netem-cluster up failed (exit {out.returncode}):\n{out.stderr}")
    try:
        for size in sizes:
            for partition in [0] + args.compare:
                results = os.path.join(tmp, f"{rate}-{size}-{partition}.json")
                t0 = time.time()
                row, j = run_bench(args, size, partition, results)
                r = {
                    "rate": rate, "bytes": size,
                    "setting": "default" if partition == 0 else f"named {partition}",
                    "ps_partition_bytes": row["ps_partition_bytes"],
                    "partitions_per_shard": -(-size // row["ps_partition_bytes"]),
                    "time_seconds": row["time_seconds"],
                    "bound_seconds": bound(args.workers, size, j),
                    "x_bound": row["time_seconds"] / bound(args.workers, size, j),
                    "beta_bytes_per_second": j["beta_bytes_per_second"],
                    "alpha_seconds": j["alpha_seconds"],
                }
                rows.append(r)
                print(f"{rate:>8} {size:>10} {r['setting']:>16} partition "
                      f"{r['ps_partition_bytes']:>8} ({r['partitions_per_shard']:>3}/shard) "
                      f"{r['time_seconds']:.4f} s = {r['x_bound']:.2f} x bound "
                      f"({time.time() - t0:.0f} s)", flush=True)
    finally:
        netem("down", f"--prefix={PREFIX}", check=False)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rates", default="100mbit,1gbit")
    p.add_argument("--sizes", default="512K,1M,4M,16M,64M")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--compare", default="1048576",
                   help="named partition sizes to run beside the default (comma list; "
                        "empty: none)")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--out", default="ps-partition-sweep")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    args = p.parse_args()
    args.compare = [parse_size(c) for c in args.compare.split(",") if c.strip()]
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    if args.workers < 2:
        p.error("--workers must be >= 2")
    if os.geteuid() != 0:
        print("ps_partition_sweep: needs root (network namespaces)", file=sys.stderr)
        return 3
    os.makedirs(args.out, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for rate in args.rates.split(","):
            sweep_rate(args, rate, sizes, rows, tmp)
    with open(os.path.join(args.out, "ps_partitions.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    lines = [f"PS push/pull, {args.workers} workers, one shard on h0, "
             f"tbf queue {args.limit or 'netem-cluster default'}; x bound = time / "
             "(N x K / B + 2 alpha), B and alpha from the same job", "",
             "| rate | size | setting | partition | per shard | time (s) | x bound |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['rate']} | {r['bytes']} | {r['setting']} | "
                     f"{r['ps_partition_bytes']} | {r['partitions_per_shard']} | "
                     f"{r['time_seconds']:.4f} | {r['x_bound']:.2f} |")
    with open(os.path.join(args.out, "ps_partitions.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
