"""`run`: the emulated hosts (bench/experiments/netem-cluster.sh), the `gradsync bench`
jobs swept on them per algorithm and size, and the run's configuration
(DIR/config.json)."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from .common import ROOT, SMALL, die
from .results import CONFIG_NAME

ALGORITHMS = {
    "ring": ["--op=allreduce", "--algorithm=ring"],
    "hd": ["--op=allreduce", "--algorithm=hd"],
    "tree": ["--op=allreduce", "--algorithm=rd"],  # key: older results say tree
    "ps1": ["--op=pushpull", "--ps_shards=1"],
    "psN": ["--op=pushpull"],  # --ps_shards=N added per N
    "hier": ["--op=allreduce", "--algorithm=hier"],
}
SWEEP = ["ring", "hd", "tree", "ps1", "psN"]
SUBNET = "10.81.0"   # the emulated hosts' /24 (netem-cluster.sh --subnet)


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
    """bench/experiments/netem-cluster.sh up on entry, down (always) on exit (also on
    SIGTERM: main() turns it into SystemExit)."""

    def __init__(self, opts, hosts, per_host):
        self.cmd = ["bash", os.path.join(ROOT, "bench/experiments/netem-cluster.sh")]
        self.state = tempfile.mkdtemp(prefix="gradsync-experiment.")
        self.flags = ["--prefix=gsexp%d" % os.getpid(), "--state-dir=" + self.state]
        self.up = ["--hosts=%d" % hosts, "--rate=" + opts["rate"], "--shaper=" + opts["shaper"],
                   "--subnet=" + SUBNET, "--start-daemons", "--ps-on-workers",
                   "--workers-per-host=%d" % per_host, "--build-dir=" + opts["build-dir"]]
        for flag in ("burst", "limit"):
            if opts[flag] and (flag != "burst" or opts["shaper"] == "tbf"):
                self.up.append("--%s=%s" % (flag, opts[flag]))
        if opts.get("ps-reduce-threads"):
            self.up.append("--ps-reduce-threads=" + opts["ps-reduce-threads"])
        if opts.get("data-dir"):   # experiment_train.py's: the workers' data
            self.up.append("--data-dir=" + os.path.abspath(opts["data-dir"]))
        self.binary = os.path.join(ROOT, opts["build-dir"], "bin", "gradsync")
        self.server = SUBNET + ".10:50051"   # the coordinator on h0

    def __enter__(self):
        rc = subprocess.run(self.cmd + ["up"] + self.flags + self.up).returncode
        if rc != 0:  # up has torn down what it made and said why
            subprocess.run(["rm", "-rf", self.state], check=False)
            if rc == 3:
                die("the emulated cluster cannot run on this machine (see above)", 3)
            die("bench/experiments/netem-cluster.sh up failed (status %d)" % rc, 1)
        return self

    def __exit__(self, *exc):
        subprocess.run(self.cmd + ["down"] + self.flags, check=False)
        subprocess.run(["rm", "-rf", self.state], check=False)

    def bench(self, n, alg, sizes, iters, out, extra=()):
        if not sizes:
            return
        print("=== N=%d %s %s" % (n, alg, sizes), flush=True)
        rc = subprocess.run(self.cmd + ["run"] + self.flags + [
            "0", self.binary, "bench", "--server=" + self.server,
            "--workers=%d" % n, "--sizes=" + sizes, "--iters=%d" % iters,
            "--warmup=1", "--quiet", "--results=" + os.path.abspath(out)]
            + ALGORITHMS[alg] + list(extra)).returncode
        if rc != 0:
            print("experiment: N=%d %s exited %d" % (n, alg, rc), file=sys.stderr)

    def sweep(self, opts, n, algs, stem):
        """Small sizes: --repeats-small rounds of one job per algorithm (a
        small point costs a few messages' latency, which varies from job to
        job; collect() keeps the median job's); then the rest, one job each."""
        small, large = split_sizes(opts["sizes"])

        def extra(alg):
            out = ["--ps_shards=%d" % n] if alg == "psN" else []
            if alg in ("ps1", "psN") and opts["ps-partition-bytes"]:
                out.append("--ps_partition_bytes=" + opts["ps-partition-bytes"])
            if alg not in ("ps1", "psN") and opts["peer-bulk-bytes"]:
                out.append("--peer_bulk_bytes=" + opts["peer-bulk-bytes"])
            return out
        for alg in algs:   # an earlier run's extra repeats must not join these
            old = re.compile(re.escape(stem % alg) + r"-small-r\d+\.json")
            for name in os.listdir(opts["out"]):
                if old.fullmatch(name):
                    os.remove(os.path.join(opts["out"], name))
        for r in range(opts["repeats-small"]):
            for alg in algs:
                name = stem % alg + "-small" + ("-r%d" % (r + 1) if r else "") + ".json"
                self.bench(n, alg, small, opts["iters-small"], os.path.join(opts["out"], name),
                           extra(alg))
        for alg in algs:
            self.bench(n, alg, large, opts["iters"],
                       os.path.join(opts["out"], stem % alg + ".json"), extra(alg))


def run(opts):
    if os.geteuid() != 0:
        die("run needs root (network namespaces); plot does not")
    os.makedirs(opts["out"], exist_ok=True)
    with open(os.path.join(opts["out"], CONFIG_NAME), "w") as f:
        json.dump(run_config(opts), f, indent=1)
    for n in opts["workers"]:
        with Cluster(opts, n + 1, 1) as c:
            c.sweep(opts, n, opts["algorithms"], "N%d-%%s" % n)
    m = opts["hier-per-host"]
    for h in opts["hier-hosts"]:
        with Cluster(opts, h + 1, m) as c:
            c.sweep(opts, h * m, ["ring", "hier"], "H%dx%d-%%s" % (h, m))


def run_config(opts):
    """What `run` asked of the emulated hosts and the bench (experiment.json
    keeps it under "config"; plot's model takes the bucket from it). burst
    and limit are None where netem-cluster.sh chose them (its defaults:
    burst max(rate/8/HZ, 72 KiB), limit burst + rate x 5 ms); burst is None
    with netem, which has no bucket."""
    def size(text):
        return int(text) if text else None
    return {"shaper": opts["shaper"], "rate": opts["rate"],
            "burst": size(opts["burst"]) if opts["shaper"] == "tbf" else None,
            "limit": size(opts["limit"]), "iters": opts["iters"],
            "iters_small": opts["iters-small"], "repeats_small": opts["repeats-small"],
            "sizes": opts["sizes"],
            "workers": opts["workers"], "algorithms": opts["algorithms"],
            "hier_hosts": opts["hier-hosts"], "hier_per_host": opts["hier-per-host"],
            # None: each job's own (in its rows)
            "ps_partition_bytes": size(opts["ps-partition-bytes"]),
            "peer_bulk_bytes": (int(opts["peer-bulk-bytes"])
                                if opts["peer-bulk-bytes"] else None),
            "ps_reduce_threads": (int(opts["ps-reduce-threads"])
                                  if opts["ps-reduce-threads"] else None),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def exit_on_sigterm():
    """SIGTERM (e.g. from `timeout`) as SystemExit, so that Cluster's exit
    still tears the emulated hosts down."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
