#!/usr/bin/env python3
"""The PS-vs-ring experiment on emulated hosts (issue 8, item 3).

  python3 bench/experiment.py run  [--workers=2,3,4] [--sizes=4K,64K,1M,16M,64M]
                                   [--algorithms=ring,hd,tree,ps1,psN]
                                   [--rate=1gbit] [--iters=3] [--out=DIR]
                                   [--build-dir=build]
  python3 bench/experiment.py plot [--out=DIR]

`run` (root: network namespaces) brings up 1 + N hosts with
deploy/netem-cluster.sh for each N (coordinator on h0, a worker and a PS
shard on each other host, every link shaped to --rate), runs one `gradsync
bench` job per algorithm from h0, tears the hosts down (always), and then
does what `plot` does: collects every row into DIR/experiment.csv and
DIR/experiment.json, fits the alpha-beta model to the ring's points by least
squares (t = a * 2(N-1) + 2(N-1)/N * K / b), and draws DIR/*.png.

Algorithms: ring, hd (halving-doubling), tree (recursive doubling): an
allreduce of K bytes on every worker; ps1, psN: push K bytes and pull them
back through 1 or N parameter-server shards (one per host, colocated).

The model lines use the formulas of common/cost_model.h with the fitted
alpha and beta; for pushpull they are those of shards on hosts of their own,
max(2NK/(S*b), 2K/b); with colocated shards and S = N, each link carries only
2(N-1)/N * K, so the psN points may beat the psN line.
"""

import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALGORITHMS = {
    "ring": ["--op=allreduce", "--algorithm=ring"],
    "hd": ["--op=allreduce", "--algorithm=hd"],
    "tree": ["--op=allreduce", "--algorithm=tree"],
    "ps1": ["--op=pushpull", "--ps_shards=1"],
    "psN": ["--op=pushpull"],  # --ps_shards=N added per N
}
STYLE = {"ring": "C0", "hd": "C1", "tree": "C2", "ps1": "C3", "psN": "C4"}


def die(msg, code=2, prog="experiment"):
    print(prog + ": " + msg, file=sys.stderr)
    sys.exit(code)


def parse_command(argv, doc, defaults, prog):
    """`run|plot --key=value...` over `defaults` (shared with
    experiment_train.py): (command, options as text); --help prints `doc`."""
    if not argv or argv[0] not in ("run", "plot") or "-h" in argv or "--help" in argv:
        print(doc)
        sys.exit(0 if argv and ("-h" in argv or "--help" in argv) else 2)
    opts = dict(defaults)
    for a in argv[1:]:
        m = re.fullmatch(r"--([a-z-]+)=(.*)", a)
        if not m or m.group(1) not in opts:
            die("unknown argument %s (see --help)" % a, prog=prog)
        opts[m.group(1)] = m.group(2)
    return argv[0], opts


def parse_args(argv):
    cmd, opts = parse_command(argv, __doc__, {
        "workers": "2,3,4", "sizes": "4K,64K,1M,16M,64M",
        "algorithms": "ring,hd,tree,ps1,psN", "rate": "1gbit", "iters": "3",
        "out": "experiment-results", "build-dir": "build"}, "experiment")
    try:
        opts["workers"] = [int(n) for n in opts["workers"].split(",")]
        opts["iters"] = int(opts["iters"])
    except ValueError:
        die("--workers and --iters take integers")
    if any(n < 2 or n > 16 for n in opts["workers"]):
        die("--workers: each N must be 2..16")
    opts["algorithms"] = opts["algorithms"].split(",")
    for alg in opts["algorithms"]:
        if alg not in ALGORITHMS:
            die("unknown algorithm %s (want %s)" % (alg, ",".join(ALGORITHMS)))
    return cmd, opts


def run(opts):
    if os.geteuid() != 0:
        die("run needs root (network namespaces); plot does not")
    cluster = ["bash", os.path.join(ROOT, "deploy/netem-cluster.sh")]
    binary = os.path.join(ROOT, opts["build-dir"], "bin", "gradsync")
    os.makedirs(opts["out"], exist_ok=True)
    for n in opts["workers"]:
        state = tempfile.mkdtemp(prefix="gradsync-experiment.")
        flags = ["--prefix=gsexp%d" % os.getpid(), "--state-dir=" + state]
        try:
            subprocess.run(cluster + ["up"] + flags + [
                "--hosts=%d" % (n + 1), "--rate=" + opts["rate"],
                "--subnet=10.81.0", "--start-daemons", "--ps-on-workers",
                "--build-dir=" + opts["build-dir"]], check=True)
            for alg in opts["algorithms"]:
                extra = ALGORITHMS[alg] + (["--ps_shards=%d" % n] if alg == "psN" else [])
                out = os.path.join(opts["out"], "N%d-%s.json" % (n, alg))
                print("=== N=%d %s" % (n, alg), flush=True)
                rc = subprocess.run(cluster + ["run"] + flags + [
                    "0", binary, "bench", "--server=10.81.0.10:50051",
                    "--workers=%d" % n, "--sizes=" + opts["sizes"],
                    "--iters=%d" % opts["iters"], "--warmup=1", "--quiet",
                    "--results=" + os.path.abspath(out)] + extra).returncode
                if rc != 0:
                    print("experiment: N=%d %s exited %d" % (n, alg, rc), file=sys.stderr)
        finally:
            subprocess.run(cluster + ["down"] + flags, check=False)
            subprocess.run(["rm", "-rf", state], check=False)


def collect(out):
    rows = []
    for name in sorted(os.listdir(out)):
        m = re.fullmatch(r"N(\d+)-(\w+)\.json", name)
        if not m:
            continue
        with open(os.path.join(out, name)) as f:
            d = json.load(f)
        for r in d.get("rows", []):
            rows.append({"workers": int(m.group(1)), "algorithm": m.group(2),
                         "ran": r["algorithm"], "bytes": r["bytes"],
                         "time_seconds": r["time_seconds"], "busbw": r["busbw"],
                         "ok": r["ok"], "job_alpha": d.get("alpha_seconds"),
                         "job_beta": d.get("beta_bytes_per_second")})
    if not rows:
        die("no N<workers>-<algorithm>.json results in %s" % out, 1)
    return rows


def fit(rows):
    """Least squares of t = a*x + c*y over the ring rows, x = 2(N-1) messages,
    y = 2(N-1)/N * K bytes: alpha = a, beta = 1/c."""
    sxx = sxy = syy = sxt = syt = 0.0
    for r in rows:
        if r["algorithm"] != "ring" or not r["ok"]:
            continue
        n, k, t = r["workers"], r["bytes"], r["time_seconds"]
        x, y = 2.0 * (n - 1), 2.0 * (n - 1) / n * k
        sxx += x * x; sxy += x * y; syy += y * y; sxt += x * t; syt += y * t
    det = sxx * syy - sxy * sxy
    if det <= 0:
        die("need ring results at two or more sizes to fit the model", 1)
    a = (sxt * syy - syt * sxy) / det
    c = (sxx * syt - sxy * sxt) / det
    return max(a, 0.0), 1.0 / c


def model(alg, n, k, alpha, beta):
    """common/cost_model.h's formulas."""
    p = 1 << int(math.log2(n))
    fold = 2 * (alpha + k / beta) if n != p else 0.0
    if alg == "ring":
        return 2 * (n - 1) * alpha + 2 * (n - 1) / n * k / beta
    if alg == "hd":
        return 2 * math.log2(p) * alpha + 2 * (p - 1) / p * k / beta + fold
    if alg == "tree":
        return math.log2(p) * (alpha + k / beta) + fold
    s = 1 if alg == "ps1" else n
    return max(2 * n * k / (s * beta), 2 * k / beta) + 2 * alpha


def write_tables(out, rows, alpha, beta):
    for r in rows:
        r["model_seconds"] = model(r["algorithm"], r["workers"], r["bytes"], alpha, beta)
        r["measured_over_model"] = r["time_seconds"] / r["model_seconds"]
    with open(os.path.join(out, "experiment.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    summary = {"alpha_seconds": alpha, "beta_bytes_per_second": beta,
               "crossover_bytes": crossovers(rows, alpha, beta), "rows": rows}
    with open(os.path.join(out, "experiment.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return summary


def crossovers(rows, alpha, beta):
    """Per N and small-message algorithm: the smallest measured size at which
    ring is faster, and where the model says so (bisection over bytes)."""
    out = {}
    for n in sorted({r["workers"] for r in rows}):
        ring = {r["bytes"]: r["time_seconds"] for r in rows
                if r["workers"] == n and r["algorithm"] == "ring"}
        for alg in ("hd", "tree"):
            other = {r["bytes"]: r["time_seconds"] for r in rows
                     if r["workers"] == n and r["algorithm"] == alg}
            sizes = sorted(set(ring) & set(other))
            if not sizes:
                continue
            measured = next((k for k in sizes if ring[k] < other[k]), None)
            lo, hi = 4.0, float(1 << 34)
            if model("ring", n, hi, alpha, beta) >= model(alg, n, hi, alpha, beta):
                predicted = None
            else:
                for _ in range(100):
                    mid = math.sqrt(lo * hi)
                    if model("ring", n, mid, alpha, beta) < model(alg, n, mid, alpha, beta):
                        hi = mid
                    else:
                        lo = mid
                predicted = hi
            out["N%d %s" % (n, alg)] = {"measured": measured, "model": predicted}
    return out


def plot(out, summary):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows, alpha, beta = summary["rows"], summary["alpha_seconds"], summary["beta_bytes_per_second"]
    ns = sorted({r["workers"] for r in rows})
    algs = [a for a in ALGORITHMS if any(r["algorithm"] == a for r in rows)]
    fit_text = "fit: alpha = %.0f us, beta = %.0f MB/s" % (alpha * 1e6, beta / 1e6)
    # 1. Time against size, one panel per N.
    fig, axes = plt.subplots(1, len(ns), figsize=(5 * len(ns), 4.2), squeeze=False)
    for ax, n in zip(axes[0], ns):
        for alg in algs:
            pts = sorted((r["bytes"], r["time_seconds"]) for r in rows
                         if r["workers"] == n and r["algorithm"] == alg)
            if not pts:
                continue
            ks = [p[0] for p in pts]
            ax.plot(ks, [p[1] * 1e3 for p in pts], "o-", color=STYLE[alg], label=alg)
            ax.plot(ks, [model(alg, n, k, alpha, beta) * 1e3 for k in ks], "--",
                    color=STYLE[alg], alpha=0.7)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tensor size K (bytes)")
        ax.set_ylabel("time per operation (ms)")
        ax.set_title("N = %d workers" % n)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(title="measured (solid), model (dashed)", fontsize=8)
    fig.suptitle("Allreduce / push-pull time against size on emulated links\n" + fit_text,
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "time_vs_size.png"), dpi=110)
    # 2. Time against N at the largest size, normalised by the ring's bytes.
    kmax = max(r["bytes"] for r in rows)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for alg in algs:
        pts = sorted((r["workers"], r["time_seconds"]) for r in rows
                     if r["bytes"] == kmax and r["algorithm"] == alg)
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] * 1e3 for p in pts], "o-", color=STYLE[alg], label=alg)
        ax.plot([p[0] for p in pts], [model(alg, p[0], kmax, alpha, beta) * 1e3 for p in pts],
                "--", color=STYLE[alg], alpha=0.7)
    ax.set_xlabel("workers N (one per emulated host)")
    ax.set_ylabel("time per operation (ms)")
    ax.set_xticks(ns)
    ax.set_title("%d MiB tensor, time against N (%s)" % (kmax >> 20, fit_text), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(title="measured (solid), model (dashed)", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "time_vs_workers.png"), dpi=110)
    print("wrote %s/time_vs_size.png, %s/time_vs_workers.png" % (out, out))


def report(summary):
    rows = summary["rows"]
    print("%s: alpha %.1f us, beta %.1f MB/s (least squares over the ring's points)" % (
        "fit", summary["alpha_seconds"] * 1e6, summary["beta_bytes_per_second"] / 1e6))
    print("%3s %-5s %12s %10s %10s %8s" % ("N", "alg", "bytes", "time_ms", "model_ms", "meas/mod"))
    for r in sorted(rows, key=lambda r: (r["workers"], r["algorithm"], r["bytes"])):
        print("%3d %-5s %12d %10.2f %10.2f %8.2f%s" % (
            r["workers"], r["algorithm"], r["bytes"], r["time_seconds"] * 1e3,
            r["model_seconds"] * 1e3, r["measured_over_model"], "" if r["ok"] else " FAILED"))
    for key, c in summary["crossover_bytes"].items():
        print("crossover %s: ring faster from %s bytes measured, %s by the model" % (
            key, c["measured"], "%.0f" % c["model"] if c["model"] else "never"))


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def main(argv):
    cmd, opts = parse_args(argv)
    if cmd == "run":
        run(opts)
    rows = collect(opts["out"])
    alpha, beta = fit(rows)
    summary = write_tables(opts["out"], rows, alpha, beta)
    report(summary)
    if not have_matplotlib():
        print("no matplotlib here: tables written, no plots (run `plot` where python3-matplotlib is)")
        return
    plot(opts["out"], summary)


if __name__ == "__main__":
    main(sys.argv[1:])
