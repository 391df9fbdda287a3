#!/usr/bin/env python3
"""The PS-vs-ring experiment on emulated hosts (issue 8, item 3).

  python3 bench/experiment.py run  [--workers=2,3,4] [--sizes=4K,64K,1M,16M,64M]
                                   [--algorithms=ring,hd,tree,ps1,psN]
                                   [--rate=1gbit] [--shaper=tbf] [--burst=73728] [--limit=B]
                                   [--iters=3] [--iters-small=20]
                                   [--hier-hosts=2,3,4] [--hier-per-host=2]
                                   [--out=DIR] [--build-dir=build]
  python3 bench/experiment.py plot [--out=DIR]

`run` (root: network namespaces) brings up 1 + N hosts with
deploy/netem-cluster.sh for each N (coordinator on h0, a worker and a PS
shard on each other host, every link shaped to --rate by --shaper: tbf, or
netem where the kernel has sch_netem (no token bucket, so small messages
are rate-limited too); --burst and --limit are tbf's bucket and queue in
bytes, see deploy/netem-cluster.sh --help), runs `gradsync bench` jobs per algorithm from h0
(sizes under 1 MiB with --iters-small iterations, the rest with --iters),
tears the hosts down (always). Then, unless --hier-hosts is empty, it brings
up 1 + H hosts with --hier-per-host workers on each (H = each of
--hier-hosts) and runs ring and hier (hierarchical: reduce inside a host,
ring among one leader per host, broadcast inside the host; the groups come
from the workers' shared host addresses) on them. Then it does what `plot`
does: collects every row into DIR/experiment.csv and DIR/experiment.json,
fits the alpha-beta model to the one-worker-per-host ring points
(t = a * 2(N-1) + 2(N-1)/N * K / b; least squares on the relative error:
b from the points of 1 MiB and more, then a from those of 16 KiB and less),
reports how many
points lie within 15% of the model and the crossovers, and draws DIR/*.png.

Algorithms: ring, hd (halving-doubling), tree (recursive doubling): an
allreduce of K bytes on every worker; ps1, psN: push K bytes and pull them
back through 1 or N parameter-server shards (one per host, colocated).

The model lines use the formulas of common/cost_model.h with the fitted
alpha and beta, except two that describe this layout more closely:
  - push/pull with S shards colocated on S of the N worker hosts, push phase
    then pull phase, each bounded by its busiest link: the shard's downlink
    carries (N-1)K/S, a worker's uplink K (S < N) or (N-1)K/N (S = N), so
    t = 2 * max((N-1)/S, 1 or (N-1)/N) * K/b + 2a;
  - hier with H hosts of L workers: the inter-host part is the ring over
    the H leaders with the fitted a, b; the two intra-host phases
    (2 ceil(log2 L) messages of K bytes) use the bench job's own ping-pong
    between ranks 0 and 1, who share a host.
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
    "hier": ["--op=allreduce", "--algorithm=hier"],
}
SWEEP = ["ring", "hd", "tree", "ps1", "psN"]
STYLE = {"ring": "C0", "hd": "C1", "tree": "C2", "ps1": "C3", "psN": "C4", "hier": "C5"}
SMALL = 1 << 20    # sizes below this get --iters-small iterations
TOLERANCE = 0.15   # the "within 15 % of the model"


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


def int_list(text, flag, lo, hi):
    try:
        values = [int(v) for v in text.split(",") if v != ""]
    except ValueError:
        die("--%s takes integers separated by commas, got %r" % (flag, text))
    if any(v < lo or v > hi for v in values):
        die("--%s: each value must be %d..%d" % (flag, lo, hi))
    return values


def parse_args(argv):
    cmd, opts = parse_command(argv, __doc__, {
        "workers": "2,3,4", "sizes": "4K,64K,1M,16M,64M",
        "algorithms": ",".join(SWEEP), "rate": "1gbit", "shaper": "tbf",
        "burst": "73728", "limit": "", "iters": "3", "iters-small": "20", "hier-hosts": "2,3,4",
        "hier-per-host": "2", "out": "experiment-results", "build-dir": "build"},
        "experiment")
    opts["workers"] = int_list(opts["workers"], "workers", 2, 16)
    opts["hier-hosts"] = int_list(opts["hier-hosts"], "hier-hosts", 2, 16)
    [opts["iters"]] = int_list(opts["iters"], "iters", 1, 1000) or [3]
    [opts["iters-small"]] = int_list(opts["iters-small"], "iters-small", 1, 1000) or [20]
    [opts["hier-per-host"]] = int_list(opts["hier-per-host"], "hier-per-host", 2, 8) or [2]
    if opts["shaper"] not in ("netem", "tbf"):
        die("--shaper must be netem or tbf")
    opts["algorithms"] = opts["algorithms"].split(",")
    for alg in opts["algorithms"]:
        if alg not in SWEEP:
            die("unknown algorithm %s (want %s)" % (alg, ",".join(SWEEP)))
    return cmd, opts


def split_sizes(sizes):
    """(sizes under 1 MiB, the rest) of a --sizes list such as 4K,64K,1M."""
    unit = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    small, large = [], []
    for text in sizes.split(","):
        m = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
        if not m:
            die("--sizes: bad size %r (want e.g. 4K,1M,64M)" % text)
        (small if int(m.group(1)) * unit[m.group(2)] < SMALL else large).append(text.strip())
    return ",".join(small), ",".join(large)


class Cluster:
    """deploy/netem-cluster.sh up on entry, down (always) on exit."""

    def __init__(self, opts, hosts, per_host):
        self.cmd = ["bash", os.path.join(ROOT, "deploy/netem-cluster.sh")]
        self.state = tempfile.mkdtemp(prefix="gradsync-experiment.")
        self.flags = ["--prefix=gsexp%d" % os.getpid(), "--state-dir=" + self.state]
        self.up = ["--hosts=%d" % hosts, "--rate=" + opts["rate"], "--shaper=" + opts["shaper"],
                   "--subnet=10.81.0", "--start-daemons", "--ps-on-workers",
                   "--workers-per-host=%d" % per_host, "--build-dir=" + opts["build-dir"]]
        for flag in ("burst", "limit"):
            if opts[flag] and (flag != "burst" or opts["shaper"] == "tbf"):
                self.up.append("--%s=%s" % (flag, opts[flag]))
        self.binary = os.path.join(ROOT, opts["build-dir"], "bin", "gradsync")

    def __enter__(self):
        rc = subprocess.run(self.cmd + ["up"] + self.flags + self.up).returncode
        if rc != 0:  # up has torn down what it made and said why
            subprocess.run(["rm", "-rf", self.state], check=False)
            if rc == 3:
                die("the emulated cluster cannot run on this machine (see above)", 3)
            die("deploy/netem-cluster.sh up failed (status %d)" % rc, 1)
        return self

    def __exit__(self, *exc):
        subprocess.run(self.cmd + ["down"] + self.flags, check=False)
        subprocess.run(["rm", "-rf", self.state], check=False)

    def bench(self, n, alg, sizes, iters, out, extra=()):
        if not sizes:
            return
        print("=== N=%d %s %s" % (n, alg, sizes), flush=True)
        rc = subprocess.run(self.cmd + ["run"] + self.flags + [
            "0", self.binary, "bench", "--server=10.81.0.10:50051",
            "--workers=%d" % n, "--sizes=" + sizes, "--iters=%d" % iters,
            "--warmup=1", "--quiet", "--results=" + os.path.abspath(out)]
            + ALGORITHMS[alg] + list(extra)).returncode
        if rc != 0:
            print("experiment: N=%d %s exited %d" % (n, alg, rc), file=sys.stderr)

    def sweep(self, opts, n, algs, stem):
        small, large = split_sizes(opts["sizes"])
        for alg in algs:
            extra = ["--ps_shards=%d" % n] if alg == "psN" else []
            base = os.path.join(opts["out"], stem % alg)
            self.bench(n, alg, small, opts["iters-small"], base + "-small.json", extra)
            self.bench(n, alg, large, opts["iters"], base + ".json", extra)


def run(opts):
    if os.geteuid() != 0:
        die("run needs root (network namespaces); plot does not")
    os.makedirs(opts["out"], exist_ok=True)
    for n in opts["workers"]:
        with Cluster(opts, n + 1, 1) as c:
            c.sweep(opts, n, opts["algorithms"], "N%d-%%s" % n)
    m = opts["hier-per-host"]
    for h in opts["hier-hosts"]:
        with Cluster(opts, h + 1, m) as c:
            c.sweep(opts, h * m, ["ring", "hier"], "H%dx%d-%%s" % (h, m))


RESULT_NAME = re.compile(r"(?:N(\d+)|H(\d+)x(\d+))-(\w+?)(-small)?\.json")


def collect(out):
    rows = []
    for name in sorted(os.listdir(out)):
        m = RESULT_NAME.fullmatch(name)
        if not m:
            continue
        per_host = int(m.group(3)) if m.group(2) else 1
        n = int(m.group(1)) if m.group(1) else int(m.group(2)) * per_host
        with open(os.path.join(out, name)) as f:
            d = json.load(f)
        for r in d.get("rows", []):
            rows.append({"workers": n, "per_host": per_host, "algorithm": m.group(4),
                         "ran": r["algorithm"], "bytes": r["bytes"],
                         "time_seconds": r["time_seconds"], "busbw": r["busbw"],
                         "ok": r["ok"], "job_alpha": d.get("alpha_seconds"),
                         "job_beta": d.get("beta_bytes_per_second")})
    if not rows and os.path.exists(os.path.join(out, "experiment.json")):
        # A directory of tables only (docs/experiment): redraw from them.
        with open(os.path.join(out, "experiment.json")) as f:
            rows = [{k: v for k, v in r.items()
                     if k not in ("model_seconds", "measured_over_model")}
                    for r in json.load(f)["rows"]]
    if not rows:
        die("no N<workers>-<algorithm>.json results (nor experiment.json) in %s" % out, 1)
    rows.sort(key=lambda r: (r["per_host"], r["workers"], r["algorithm"], r["bytes"]))
    return rows


BANDWIDTH_FROM = 1 << 20   # fit beta on ring points of at least this size,
LATENCY_UPTO = 16 << 10    # and alpha on those of at most this size


def weighted_ls(points):
    """(a, c) minimising sum(((t - a*x - c*y) / t)^2) over (x, y, t)."""
    sxx = sxy = syy = sxt = syt = 0.0
    for x, y, t in points:
        w = 1.0 / (t * t)
        sxx += w * x * x; sxy += w * x * y; syy += w * y * y
        sxt += w * x * t; syt += w * y * t
    det = sxx * syy - sxy * sxy
    if det <= 0:
        return None
    return (sxt * syy - syt * sxy) / det, (sxx * syt - sxy * sxt) / det


def fit(rows):
    """alpha and beta of t = alpha * 2(N-1) + 2(N-1)/N * K / beta from the
    one-worker-per-host ring rows, on the relative error (each point weighted
    1/t^2), in two stages as the Hockney model is usually fitted: beta from
    the bandwidth-bound points (K >= 1 MiB, alpha free), then alpha from the
    latency-bound ones (K <= 16 KiB) with that beta. Without points in both
    ranges, one fit over all points."""
    pts = [(2.0 * (r["workers"] - 1), 2.0 * (r["workers"] - 1) / r["workers"] * r["bytes"],
            r["time_seconds"], r["bytes"]) for r in rows
           if r["algorithm"] == "ring" and r["ok"] and r.get("per_host", 1) == 1]
    big = [p[:3] for p in pts if p[3] >= BANDWIDTH_FROM]
    small = [p[:3] for p in pts if p[3] <= LATENCY_UPTO]
    both = weighted_ls(big) if big and small else None
    if both is None:
        both = weighted_ls([p[:3] for p in pts])
        if both is None:
            die("need ring results at two or more sizes to fit the model", 1)
        a, c = both
    else:
        c = both[1]
        a = (sum((t - y * c) * x / (t * t) for x, y, t in small) /
             sum(x * x / (t * t) for x, y, t in small))
    if c <= 0:
        die("the ring's times do not grow with size: no bandwidth to fit", 1)
    return max(a, 0.0), 1.0 / c


def model(alg, n, k, alpha, beta, per_host=1, local=None):
    """Predicted seconds (see the module text). `local`: (alpha, beta) of the
    link between two ranks on one host, for hier's intra-host phases."""
    p = 1 << int(math.log2(n))
    fold = 2 * (alpha + k / beta) if n != p else 0.0
    if alg == "ring":
        return 2 * (n - 1) * alpha + 2 * (n - 1) / n * k / beta
    if alg == "hd":
        return 2 * math.log2(p) * alpha + 2 * (p - 1) / p * k / beta + fold
    if alg == "tree":
        return math.log2(p) * (alpha + k / beta) + fold
    if alg == "hier":
        hosts = n // per_host
        la, lb = local if local else (alpha, beta)
        intra = 2 * math.ceil(math.log2(per_host)) * (la + k / lb) if per_host > 1 else 0.0
        return intra + model("ring", hosts, k, alpha, beta) if hosts > 1 else intra
    return pushpull_model(n, 1 if alg == "ps1" else n, k, alpha, beta)


PARTITION_BYTES = 4 << 20   # common/ps_layout.h kPsPartitionBytes


def pushpull_model(n, s, k, alpha, beta):
    """Push K bytes and pull them back through S shards colocated with
    workers 0..S-1, laid out as common/ps_layout.h does (P = ceil(K / 4 MiB)
    partitions, round-robin over the shards). Every byte a host sends (its
    pushes to other hosts' shards, its shard's answers to other hosts) shares
    its uplink, every byte it receives its downlink. With P >= 2 the pushes of
    later partitions overlap the pulls of earlier ones, so the time is the
    busiest link's total; with one partition the pull waits for every push,
    so it is the busiest push link plus the busiest pull link."""
    p = max(1, -(-k // PARTITION_BYTES))
    held = [0.0] * n   # bytes of the tensor on host h's shard
    for i in range(p):
        held[i % s] += k / p
    push_out = [k - held[h] for h in range(n)]
    push_in = [(n - 1) * held[h] for h in range(n)]
    # The pull is the push's mirror image (each shard answers what it was
    # pushed), so a phase's busiest link carries max(push_out + push_in).
    if p == 1:
        return 2 * max(push_out + push_in) / beta + 2 * alpha
    load = [push_out[h] + push_in[h] for h in range(n)]  # = up = down per host
    return max(load) / beta + 2 * alpha


def row_model(r, alpha, beta):
    local = (r["job_alpha"], r["job_beta"]) if r["job_alpha"] and r["job_beta"] else None
    return model(r["algorithm"], r["workers"], r["bytes"], alpha, beta,
                 r.get("per_host", 1), local)


def write_tables(out, rows, alpha, beta):
    for r in rows:
        r["model_seconds"] = row_model(r, alpha, beta)
        r["measured_over_model"] = r["time_seconds"] / r["model_seconds"]
    with open(os.path.join(out, "experiment.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    summary = {"alpha_seconds": alpha, "beta_bytes_per_second": beta,
               "crossover_bytes": crossovers(rows, alpha, beta),
               "within_tolerance": within_tolerance(rows),
               "ring_flatness": ring_flatness(rows), "rows": rows}
    with open(os.path.join(out, "experiment.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return summary


def within_tolerance(rows):
    """How many ok points lie within TOLERANCE of the model, per algorithm."""
    out = {"tolerance": TOLERANCE, "by_algorithm": {}}
    for r in rows:
        if not r["ok"]:
            continue
        key = r["algorithm"] + ("" if r.get("per_host", 1) == 1 else "/%dph" % r["per_host"])
        c = out["by_algorithm"].setdefault(key, {"within": 0, "of": 0})
        c["of"] += 1
        c["within"] += abs(r["measured_over_model"] - 1) <= TOLERANCE
    out["within"] = sum(c["within"] for c in out["by_algorithm"].values())
    out["of"] = sum(c["of"] for c in out["by_algorithm"].values())
    return out


def ring_flatness(rows):
    """Largest-size one-per-host ring time divided by 2(N-1)/N, per N, and
    the spread max/min - 1 (the issue's "varies by <= 10 %")."""
    ring = [r for r in rows if r["algorithm"] == "ring" and r.get("per_host", 1) == 1 and r["ok"]]
    if not ring:
        return None
    kmax = max(r["bytes"] for r in ring)
    norm = {r["workers"]: r["time_seconds"] / (2 * (r["workers"] - 1) / r["workers"])
            for r in ring if r["bytes"] == kmax}
    return {"bytes": kmax, "normalised_seconds": norm,
            "spread": max(norm.values()) / min(norm.values()) - 1}


def measured_crossover(sizes, ring, other):
    """(the smallest size at which ring is faster, the size where ring/other
    crosses 1 interpolated on log scales between that size and the one
    before it); (None, None) if ring never wins; the crossover is None when
    ring already wins at the smallest size."""
    for i, k in enumerate(sizes):
        if ring[k] < other[k]:
            if i == 0:
                return k, None
            k0 = sizes[i - 1]
            r0 = math.log(ring[k0] / other[k0])
            r1 = math.log(ring[k] / other[k])
            f = r0 / (r0 - r1) if r0 != r1 else 0.5
            return k, math.exp(math.log(k0) + f * (math.log(k) - math.log(k0)))
    return None, None


def crossovers(rows, alpha, beta):
    """Per N and small-message algorithm: the smallest measured size at which
    ring is faster, and where the model says so (bisection over bytes; None:
    never, 0: at every size)."""
    out = {}
    flat = [r for r in rows if r.get("per_host", 1) == 1]
    for n in sorted({r["workers"] for r in flat}):
        ring = {r["bytes"]: r["time_seconds"] for r in flat
                if r["workers"] == n and r["algorithm"] == "ring"}
        for alg in ("hd", "tree"):
            other = {r["bytes"]: r["time_seconds"] for r in flat
                     if r["workers"] == n and r["algorithm"] == alg}
            sizes = sorted(set(ring) & set(other))
            if not sizes:
                continue
            first, measured = measured_crossover(sizes, ring, other)
            lo, hi = 4.0, float(1 << 34)
            if model("ring", n, hi, alpha, beta) >= model(alg, n, hi, alpha, beta):
                predicted = None
            elif model("ring", n, lo, alpha, beta) < model(alg, n, lo, alpha, beta):
                predicted = 0.0  # ring faster at every size
            else:
                for _ in range(100):
                    mid = math.sqrt(lo * hi)
                    if model("ring", n, mid, alpha, beta) < model(alg, n, mid, alpha, beta):
                        hi = mid
                    else:
                        lo = mid
                predicted = hi
            out["N%d %s" % (n, alg)] = {"measured": measured, "first_ring_win": first,
                                        "model": predicted}
    return out


def plot(out, summary):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows, alpha, beta = summary["rows"], summary["alpha_seconds"], summary["beta_bytes_per_second"]
    flat = [r for r in rows if r.get("per_host", 1) == 1]
    fit_text = "fit: alpha = %.0f us, beta = %.0f MB/s" % (alpha * 1e6, beta / 1e6)
    plot_sizes(plt, out, flat, alpha, beta, fit_text)
    plot_workers(plt, out, flat, alpha, beta, fit_text)
    names = ["time_vs_size.png", "time_vs_workers.png"]
    grouped = [r for r in rows if r.get("per_host", 1) > 1]
    if grouped:
        plot_hier(plt, out, grouped, alpha, beta, fit_text)
        names.append("hier_vs_ring.png")
    print("wrote " + ", ".join(os.path.join(out, n) for n in names))


def series(rows, alg, key, value):
    return sorted((r[key], r[value], r) for r in rows if r["algorithm"] == alg)


def draw(ax, pts, alg, alpha, beta, label):
    """Measured points solid, their model dashed, in the algorithm's colour."""
    xs = [p[0] for p in pts]
    ax.plot(xs, [p[1] * 1e3 for p in pts], "o-", color=STYLE[alg], label=label)
    ax.plot(xs, [row_model(p[2], alpha, beta) * 1e3 for p in pts], "--",
            color=STYLE[alg], alpha=0.7)


def finish(ax, title):
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="measured (solid), model (dashed)", fontsize=8)
    ax.set_title(title, fontsize=10)


def save(fig, path, suptitle=None):
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_sizes(plt, out, rows, alpha, beta, fit_text):
    """Time against size, one panel per N."""
    ns = sorted({r["workers"] for r in rows})
    cols = min(4, len(ns))
    lines = -(-len(ns) // cols)
    fig, axes = plt.subplots(lines, cols, figsize=(5 * cols, 4.2 * lines), squeeze=False)
    for ax in axes.flat[len(ns):]:
        ax.set_visible(False)
    for ax, n in zip(axes.flat, ns):
        for alg in SWEEP:
            pts = series([r for r in rows if r["workers"] == n], alg, "bytes", "time_seconds")
            if pts:
                draw(ax, pts, alg, alpha, beta, alg)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tensor size K (bytes)")
        ax.set_ylabel("time per operation (ms)")
        finish(ax, "N = %d workers" % n)
    save(fig, os.path.join(out, "time_vs_size.png"),
         "Allreduce / push-pull time against size on emulated links\n" + fit_text)


def plot_workers(plt, out, rows, alpha, beta, fit_text):
    """Time against N at the largest size."""
    kmax = max(r["bytes"] for r in rows)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for alg in SWEEP:
        pts = series([r for r in rows if r["bytes"] == kmax], alg, "workers", "time_seconds")
        if pts:
            draw(ax, pts, alg, alpha, beta, alg)
    ax.set_xlabel("workers N (one per emulated host)")
    ax.set_ylabel("time per operation (ms)")
    ax.set_xticks(sorted({r["workers"] for r in rows}))
    finish(ax, "%s tensor, time against N (%s)" % (human(kmax), fit_text))
    save(fig, os.path.join(out, "time_vs_workers.png"))


def plot_hier(plt, out, rows, alpha, beta, fit_text):
    """Hierarchical against ring with several workers per host, time against
    N at the largest and at a middle size."""
    sizes = sorted({r["bytes"] for r in rows})
    picks = sorted({sizes[-1], sizes[len(sizes) // 2]})
    fig, axes = plt.subplots(1, len(picks), figsize=(6 * len(picks), 4.2), squeeze=False)
    per_host = rows[0]["per_host"]
    for ax, k in zip(axes[0], picks):
        for alg in ("ring", "hier"):
            pts = series([r for r in rows if r["bytes"] == k], alg, "workers", "time_seconds")
            if pts:
                draw(ax, pts, alg, alpha, beta, alg)
        ax.set_xlabel("workers N (%d per emulated host)" % per_host)
        ax.set_ylabel("time per allreduce (ms)")
        ax.set_xticks(sorted({r["workers"] for r in rows}))
        ax.set_ylim(bottom=0)
        finish(ax, "%s, %d workers per host" % (human(k), per_host))
    save(fig, os.path.join(out, "hier_vs_ring.png"),
         "Hierarchical vs ring allreduce (%s)" % fit_text)


def human(k):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if k >= 1 << shift and k % (1 << shift) == 0:
            return "%d %s" % (k >> shift, unit)
    return "%d B" % k


def report(summary):
    rows = summary["rows"]
    print("%s: alpha %.1f us, beta %.1f MB/s (relative least squares over the ring's points)" % (
        "fit", summary["alpha_seconds"] * 1e6, summary["beta_bytes_per_second"] / 1e6))
    print("%3s %2s %-5s %12s %10s %10s %8s" % ("N", "ph", "alg", "bytes", "time_ms",
                                              "model_ms", "meas/mod"))
    for r in rows:
        off = abs(r["measured_over_model"] - 1) > TOLERANCE
        print("%3d %2d %-5s %12d %10.3f %10.3f %8.2f%s%s" % (
            r["workers"], r.get("per_host", 1), r["algorithm"], r["bytes"],
            r["time_seconds"] * 1e3, r["model_seconds"] * 1e3, r["measured_over_model"],
            " *" if off else "", "" if r["ok"] else " FAILED"))
    w = summary["within_tolerance"]
    print("within %d%% of the model: %d of %d points (%s); * marks the others" % (
        round(w["tolerance"] * 100), w["within"], w["of"], ", ".join(
            "%s %d/%d" % (k, c["within"], c["of"]) for k, c in sorted(w["by_algorithm"].items()))))
    flat = summary["ring_flatness"]
    if flat:
        print("ring at %s, time / (2(N-1)/N): %s ms; spread %.1f%%" % (
            human(flat["bytes"]), ", ".join("N=%s %.1f" % (n, t * 1e3) for n, t in
                                           sorted(flat["normalised_seconds"].items())),
            flat["spread"] * 100))
    for key, c in summary["crossover_bytes"].items():
        print("crossover %s: ring faster from %s bytes measured (crossing at %s), %s by the model%s" % (
            key, c["first_ring_win"], "%.0f" % c["measured"] if c["measured"] else "-",
            model_crossover_text(c["model"]), ratio_text(c)))


def model_crossover_text(k):
    if k is None:
        return "never"
    return "%.0f" % k if k > 0 else "at every size"


def ratio_text(c):
    if not c["measured"] or not c["model"]:
        return ""
    return " (measured/model %.2f)" % (c["measured"] / c["model"])


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
