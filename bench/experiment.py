#!/usr/bin/env python3
"""The PS-vs-ring experiment on emulated hosts (issue 8, item 3).

  python3 bench/experiment.py run  [--workers=2,3,4] [--sizes=4K,64K,1M,16M,64M]
                                   [--algorithms=ring,hd,tree,ps1,psN]
                                   [--rate=1gbit] [--shaper=tbf] [--burst=73728] [--limit=B]
                                   [--iters=3] [--iters-small=20] [--repeats-small=3]
                                   [--hier-hosts=2,3,4] [--hier-per-host=2]
                                   [--ps-partition-bytes=B] [--peer-bulk-bytes=B]
                                   [--ps-reduce-threads=T] [--out=DIR] [--build-dir=build] [--base=DIR]
  python3 bench/experiment.py plot [--out=DIR] [--burst=B] [--base=DIR]

`run` (root: network namespaces) brings up 1 + N hosts with
deploy/netem-cluster.sh for each N (coordinator on h0, a worker and a PS
shard on each other host, every link shaped to --rate by --shaper: tbf, or
netem where the kernel has sch_netem (no token bucket, so small messages
are rate-limited too); --burst and --limit are tbf's bucket and queue in
bytes, see deploy/netem-cluster.sh --help), runs `gradsync bench` jobs per algorithm from h0
(sizes under 1 MiB with --iters-small iterations in --repeats-small jobs
per algorithm, run in rounds that alternate the algorithms, each point the
median job's; the rest with --iters in one job),
tears the hosts down (always). Then, unless --hier-hosts is empty, it brings
up 1 + H hosts with --hier-per-host workers on each (H = each of
--hier-hosts) and runs ring and hier (hierarchical: reduce inside a host,
ring among one leader per host, broadcast inside the host; the groups come
from the workers' shared host addresses) on them. It records its
configuration in DIR/config.json first. Then it does what `plot` does:
collects every row into DIR/experiment.csv and DIR/experiment.json (with
the configuration under "config"), fits the models below to the
one-worker-per-host ring points, reports how many points lie within 15% of
each and why the others do not where that is known, the crossovers (where
the model ends in a tie, also where the two come within 5% of each other), and
a diagnostic (alpha_per_workers: how many one-worker-per-host points an
alpha fitted per N would bring within 15%, against the one alpha), and
draws DIR/*.png with the token-bucket model (plain alpha-beta when
there is no bucket). plot --burst=B: the bucket the model assumes (0: none);
by default the run's configuration's, else run's default, 73728 (older
results do not record it; the output says which it used).

--base=DIR (run and plot): complete this run with an earlier one: every
point (N, workers per host, algorithm, size) that this run did not measure
is taken from DIR (a run directory, or a directory of tables such as
docs/experiment), so a short run can re-measure some points, e.g. only the
small sizes, and be fitted, counted and drawn with the rest. Both runs
must have shaped their links alike (shaper, rate, burst, limit) and say
so in their configuration, else it exits 1 (run checks this before it
sweeps). Each row's `source` names the run that measured it (its date).
The tables record the earlier runs under config.base; the plots draw
their points hollow, and the titles and the report say how many points
came from each run and which runs the fit rests on. A later `plot` of the
same run directory merges with the same DIR again (experiment.json
records it; --base=none draws the run alone).

Algorithms: ring, hd (halving-doubling), tree (recursive doubling): an
allreduce of K bytes on every worker; ps1, psN: push K bytes and pull them
back through 1 or N parameter-server shards (one per host, colocated),
in partitions of at most --ps-partition-bytes (the jobs' ps_partition_bytes,
65536..4194304; default: the job's own, 1 MiB unless a shard could not let
that many pulls wait), which the model follows (the bench's JSON records it
per job; data without it had 4 MiB partitions). --peer-bulk-bytes is the
allreduce jobs' peer_bulk_bytes (gradsync --help; -1: never use the bulk
connections; default: the job's own, 4 MiB). --ps-reduce-threads is every
shard's --ps_reduce_threads (1..64; default: the server's own, 2), recorded
in the configuration.

Two models (computed in bench/experiment_model.py), each with one alpha
(seconds per message) and one beta (bytes/s) fitted to the ring's points on
the relative error: beta from the points of 1 MiB and more, alpha from
those of 16 KiB and less (fit()).
  - alpha-beta: the formulas of common/cost_model.h without host groups
    (ring: t = a * 2(N-1) + 2(N-1)/N * K/b);
  - alpha-beta+bucket: the emulated link as it is, a tbf token bucket of
    `burst` bytes refilled at the rate on each host's egress and on the
    bridge port toward it. Each algorithm runs round by round with each
    rank's bytes per round from worker/collectives/ (schedule()); a round
    takes alpha plus what its busiest link needs, max(0, m - tokens)/b with
    tokens = min(burst, tokens left + b x time since the link last sent)
    (Link), so a message that fits the bucket costs alpha alone, and a
    link that waits less than burst/b loses nothing. The bench times each
    run after a barrier, so the runs are simulated back to back until the
    buckets settle (shaped_seconds()). With burst = 0 it is the first model.
    Except tree (recursive doubling) and push/pull, whose code does not run
    in rounds: they are simulated message by message as the code sends
    them (bench/flow_model.py; tree: 1 MiB segments forwarded as they are
    summed, the early round-0 send that shares a folded rank's links, the
    receiver's mailbox of 16 segments; push/pull: each worker's partitions
    in its staggered order through a window of 2S + 2, a shard answering a
    partition when every push of it is in; fair shares of each link), with
    and without the bucket.
The bucket is counted in payload bytes (burst x b / rate: tbf also counts
headers), the rate from the configuration (else 1gbit).

Three lines follow this layout more closely than cost_model.h without
host groups:
  - push/pull with S shards colocated on S of the N worker hosts, push phase
    then pull phase, each bounded by its busiest link: the shard's downlink
    carries (N-1)K/S, a worker's uplink K (S < N) or (N-1)K/N (S = N), so
    t = 2 * max((N-1)/S, 1 or (N-1)/N) * K/b + 2a with one partition, the
    busiest link's total with several (plain alpha-beta; the link model
    plays the partitions out, see above);
  - hier with H hosts of L workers: the inter-host part is the ring over
    the H leaders with the fitted a, b; the two intra-host phases (chains
    over the L ranks pipelined by 1 MiB segment, (L - 2 + s) segment times
    each for s segments) use the bench job's own link inside a host
    (its JSON's inside_host; results from before 2026-11-27: ranks 0 and
    1's, who share a host);
  - the ring with L workers per host (the link model only): ranks go host
    by host (the coordinator's OrderByHost), so N/L of the ring's N hops
    cross a link and the others stay on a host, where a message costs the
    job's own ping-pong alpha; a chunk is forwarded as soon as it arrives,
    so its 2(N-1) hops alternate the two and each round costs their mean,
    a/L + a_local (L-1)/L, with the same bytes per link as one per host.
    Applied when the bench's host groups put ranks 0 and 1 on one host
    (results from before 2026-11-27 have no groups: when their ping-pong
    was over twice as fast as the link).
"""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The models (bench/experiment_model.py, beside this file). Link,
# payload_burst, pushpull_model and shaped_seconds are not used here: they
# are imported so that tests reach every model as experiment.X.
from experiment_model import (  # noqa: E402,F401
    BANDWIDTH_FROM, DEFAULT_BURST, DEFAULT_RATE, FitError, LATENCY_UPTO, Link,
    alpha_per_workers, fit,
    measured_crossover, model, model_crossover, payload_burst, pushpull_model, pushpull_rounds,
    ring_rows, row_model, schedule, shaped_seconds)

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
TIE_SLACK = 0.05   # "tied" for a crossover the model ends in a tie


def read_json(path, prog="experiment"):
    """The JSON in `path`; exits 1 naming the file when it cannot be read or
    is not JSON (a half-written result, a file that is something else)."""
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        die("cannot read %s: %s" % (path, e.strerror or e), 1, prog)
    except ValueError as e:
        die("%s is not valid JSON (%s)" % (path, e), 1, prog)


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
        "burst": None, "limit": "", "iters": "3", "iters-small": "20", "repeats-small": "3",
        "hier-hosts": "2,3,4",
        "hier-per-host": "2", "ps-partition-bytes": "", "peer-bulk-bytes": "",
        "ps-reduce-threads": "", "out": "experiment-results",
        "build-dir": "build", "base": ""},
        "experiment")
    opts["workers"] = int_list(opts["workers"], "workers", 2, 16)
    opts["hier-hosts"] = int_list(opts["hier-hosts"], "hier-hosts", 2, 16)
    [opts["iters"]] = int_list(opts["iters"], "iters", 1, 1000) or [3]
    [opts["iters-small"]] = int_list(opts["iters-small"], "iters-small", 1, 1000) or [20]
    [opts["repeats-small"]] = int_list(opts["repeats-small"], "repeats-small", 1, 20) or [3]
    [opts["hier-per-host"]] = int_list(opts["hier-per-host"], "hier-per-host", 2, 8) or [2]
    if opts["shaper"] not in ("netem", "tbf"):
        die("--shaper must be netem or tbf")
    # run: tbf's bucket (empty: the cluster's own default); plot: the bucket
    # the model assumes (not given: the run's configuration, see shaping()).
    if opts["burst"] is None and cmd == "run":
        opts["burst"] = str(DEFAULT_BURST)
    for flag in ("burst", "limit", "ps-partition-bytes"):
        if opts[flag] and not opts[flag].isdigit():
            die("--%s takes a byte count, got %r" % (flag, opts[flag]))
    if opts["ps-reduce-threads"] and not (opts["ps-reduce-threads"].isdigit() and
                                          1 <= int(opts["ps-reduce-threads"]) <= 64):
        die("--ps-reduce-threads takes 1..64, got %r" % opts["ps-reduce-threads"])
    if opts["peer-bulk-bytes"] and not re.fullmatch(r"-1|\d+", opts["peer-bulk-bytes"]):
        die("--peer-bulk-bytes takes a byte count or -1, got %r" % opts["peer-bulk-bytes"])
    if cmd == "plot" and opts["burst"] == "":
        die("plot --burst= takes a byte count (0: no bucket, plain alpha-beta)")
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


SUBNET = "10.81.0"   # the emulated hosts' /24 (netem-cluster.sh --subnet)


class Cluster:
    """deploy/netem-cluster.sh up on entry, down (always) on exit (also on
    SIGTERM: main() turns it into SystemExit)."""

    def __init__(self, opts, hosts, per_host):
        self.cmd = ["bash", os.path.join(ROOT, "deploy/netem-cluster.sh")]
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


CONFIG_NAME = "config.json"   # run's configuration, next to its results


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


RESULT_NAME = re.compile(r"(?:N(\d+)|H(\d+)x(\d+))-(\w+?)(?:(-small)(?:-r(\d+))?)?\.json")


DERIVED = ("model_seconds", "measured_over_model", "plain_model_seconds",
           "plain_measured_over_model", "note")   # what write_tables adds to a row


def collect(out):
    """(rows, config) of a run directory (N<workers>-<algorithm>.json and
    config.json), or of experiment.json alone; config is None for results
    that do not carry it (runs before it was recorded). A point measured by
    several jobs (--repeats-small: -small.json, -small-r2.json, ...) is the
    median job's row (the lower median of an even count), with every job's
    time in repeat_seconds, and ok only if every job's result was."""
    rows = []
    config = None
    if not os.path.isdir(out):
        die("no directory %s" % out, 1)
    if os.path.exists(os.path.join(out, CONFIG_NAME)):
        config = read_json(os.path.join(out, CONFIG_NAME))
        if not isinstance(config, dict):
            die("%s is not a run's configuration" % os.path.join(out, CONFIG_NAME), 1)
    for name in sorted(os.listdir(out)):
        m = RESULT_NAME.fullmatch(name)
        if not m:
            continue
        per_host = int(m.group(3)) if m.group(2) else 1
        n = int(m.group(1)) if m.group(1) else int(m.group(2)) * per_host
        try:
            rows += result_rows(read_json(os.path.join(out, name)), n, per_host, m.group(4))
        except (KeyError, TypeError, AttributeError) as e:
            die("%s is not a gradsync bench result (%s: %s)" % (
                os.path.join(out, name), type(e).__name__, e), 1)
    rows = median_of_repeats(rows, (config or {}).get("repeats_small"))
    if not rows and os.path.exists(os.path.join(out, "experiment.json")):
        # A directory of tables only (docs/experiment): redraw from them.
        path = os.path.join(out, "experiment.json")
        d = read_json(path)
        table = d.get("rows") if isinstance(d, dict) else None
        if not isinstance(table, list) or not all(
                isinstance(r, dict) and all(k in r for k in TABLE_KEYS) for r in table):
            die("%s is not an experiment.py table (a list of rows with %s)" % (
                path, ", ".join(TABLE_KEYS)), 1)
        rows = [{k: v for k, v in r.items() if k not in DERIVED} for r in table]
        config = d.get("config")
    if not rows:
        die("no N<workers>-<algorithm>.json results (nor experiment.json) in %s" % out, 1)
    rows.sort(key=lambda r: (r["per_host"], r["workers"], r["algorithm"], r["bytes"]))
    return rows, config


TABLE_KEYS = ("workers", "per_host", "algorithm", "bytes", "time_seconds", "ok")


def result_rows(d, n, per_host, algorithm):
    """The rows of one bench job's results file (`gradsync bench
    --results`) for N = n workers, per_host per host, algorithm as swept."""
    # Whether the job's ping-pong (ranks 0 and 1) stayed inside a host, and
    # its link inside a host: the bench reports its host groups and both
    # links since 2026-11-27.
    groups = d.get("host_groups") or []
    shared = {"job_shared_host": groups[0] == groups[1]} if len(groups) >= 2 else {}
    local = d.get("inside_host") or {}
    job_alpha = local.get("alpha_seconds", d.get("alpha_seconds"))
    job_beta = local.get("beta_bytes_per_second", d.get("beta_bytes_per_second"))
    return [dict({"workers": n, "per_host": per_host, "algorithm": algorithm,
                  "ran": r["algorithm"], "bytes": r["bytes"],
                  "time_seconds": r["time_seconds"], "busbw": r["busbw"],
                  "ok": r["ok"], "job_alpha": job_alpha, "job_beta": job_beta,
                  "ps_partition_bytes": d.get("ps_partition_bytes") or None}, **shared)
            for r in d.get("rows", [])]


LINK_KEYS = ("shaper", "rate", "burst", "limit")   # run_config's: how the links were shaped


def point_key(r):
    return (r.get("per_host", 1), r["workers"], r["algorithm"], r["bytes"])


def run_label(config):
    """The name a run's points carry in `source` once runs are merged: its
    date (runs record it since 2026-11-27), else "undated"."""
    return (config or {}).get("date") or "undated"


def link_differences(mine, theirs):
    """How two runs' configs shaped their links differently (LINK_KEYS; the
    rate compared in bytes/s, so 1gbit = 1000mbit): a list of texts, empty
    when alike."""
    out = []
    for k in LINK_KEYS:
        a, b = mine.get(k), theirs.get(k)
        same = (rate_bytes(a) == rate_bytes(b) if k == "rate" and rate_bytes(a) else a == b)
        if not same:
            out.append("%s %s here, %s there" % (k, a, b))
    return out


def read_base(base, config):
    """(rows, config) of the earlier run in `base`, after checking that it
    and this run (config) both record how their links were shaped and did
    it alike; exits 1 otherwise."""
    if not os.path.isdir(base):
        die("--base: no directory %s" % base, 1)
    if not any(RESULT_NAME.fullmatch(n) for n in os.listdir(base)) and \
            not os.path.exists(os.path.join(base, "experiment.json")):
        die("--base: %s holds no results (N<workers>-<algorithm>.json or experiment.json)"
            % base, 1)
    base_rows, base_config = collect(base)
    for name, cfg in (("this run", config), ("--base " + base, base_config)):
        if cfg is None:
            die("--base: %s does not record how its links were shaped (config.json "
                "or experiment.json's config), so the two cannot be checked to match" % name, 1)
    differ = link_differences(config, base_config)
    if differ:
        die("--base: %s shaped its links otherwise (%s); its points would not fit this "
            "run's model" % (base, "; ".join(differ)), 1)
    return base_rows, base_config


def merge_base(rows, config, base):
    """--base=DIR: this run's rows, then every point of the earlier run in
    DIR (a run directory or a directory of tables, as collect() reads it)
    that this run did not measure. Each row's `source` names the run that
    measured it (run_label(); rows that already carry one, from an earlier
    merge, keep it). Both runs must have shaped their links alike, or the
    points would not belong to one model (read_base() exits 1 otherwise).
    The config returned is this run's, with the earlier run appended to its
    "base" list: directory, config and how many points it gave."""
    base_rows, base_config = read_base(base, config)
    have = {point_key(r) for r in rows}
    mine = [dict(r, source=r.get("source") or run_label(config)) for r in rows]
    taken = [dict(r, source=r.get("source") or run_label(base_config))
             for r in base_rows if point_key(r) not in have]
    merged = dict(config)
    merged["base"] = list(config.get("base") or []) + [
        {"dir": base, "points": len(taken), "config": base_config}]
    merged_rows = mine + taken
    merged_rows.sort(key=lambda r: (r.get("per_host", 1), r["workers"], r["algorithm"],
                                    r["bytes"]))
    return merged_rows, merged


def remembered_base(out):
    """The --base a run directory was last drawn with, from its own
    experiment.json, when the directory also holds job results (a plain
    redraw would read only those): the last base's directory, or exits 1
    if that is gone. None when there is nothing to remember."""
    path = os.path.join(out, "experiment.json")
    if not os.path.exists(path) or not any(RESULT_NAME.fullmatch(n) for n in os.listdir(out)):
        return None
    d = read_json(path)
    bases = ((d.get("config") if isinstance(d, dict) else None) or {}).get("base")
    if not bases:
        return None
    last = bases[-1]["dir"]
    if not os.path.isdir(last):
        die("%s was drawn with --base=%s, which is not here: pass --base=DIR again "
            "(or --base=none to draw this run alone)" % (out, last), 1)
    return last


def median_of_repeats(rows, repeats=None):
    """One row per (per_host, workers, algorithm, bytes): where several jobs
    measured it, the median job's, with repeat_seconds (every job's time,
    sorted) and ok only if all were. repeats: the jobs the run asked for per
    small point (config's repeats_small); a small point with fewer (a job
    that failed and wrote nothing) gets jobs_missing."""
    groups = {}
    for r in rows:
        groups.setdefault((r["per_host"], r["workers"], r["algorithm"], r["bytes"]), []).append(r)
    out = []
    for same in groups.values():
        same.sort(key=lambda r: r["time_seconds"])
        row = dict(same[(len(same) - 1) // 2])
        if len(same) > 1:
            row["repeat_seconds"] = [r["time_seconds"] for r in same]
            row["ok"] = all(r["ok"] for r in same)
        if repeats and row["bytes"] < SMALL and len(same) < repeats:
            row["jobs_missing"] = repeats - len(same)
        out.append(row)
    return out


def rate_bytes(text):
    """tc's rate syntax (1gbit, 100mbit, 10mbps, 1gibit; a bare number is
    bit/s) in bytes per second; None if it is not one."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgt]?)(i?)(bit|bps)?", str(text).strip().lower())
    if not m or (m.group(3) and not m.group(2)):
        return None
    value = float(m.group(1)) * (1024 if m.group(3) else 1000) ** " kmgt".index(m.group(2) or " ")
    return value if m.group(4) == "bps" else value / 8


def shaping(burst_flag, config):
    """The link the model assumes, and where each value came from: the bucket
    from plot's --burst, else the run's configuration (netem: no bucket),
    else run's default, 73728 bytes; the rate (only for counting the bucket
    in payload bytes, see payload_burst) from the configuration, else run's
    default, 1gbit; the queue from the configuration, else netem-cluster.sh's
    default, burst + rate x 5 ms (only for telling PS stalls, see note())."""
    cfg = config or {}
    shaper = cfg.get("shaper", "tbf")
    if burst_flag:
        burst, source = int(burst_flag), "--burst"
    elif config is None:
        burst, source = DEFAULT_BURST, "run's default; the results do not record it"
    elif shaper == "netem":
        burst, source = 0, "netem, no bucket"
    elif cfg.get("burst") is not None:
        burst, source = int(cfg["burst"]), "the run's config"
    else:
        burst, source = DEFAULT_BURST, (
            "run's default; the run left the bucket to netem-cluster.sh, which does not record it")
    rate = cfg.get("rate", DEFAULT_RATE)
    rate_bps = rate_bytes(rate)
    limit = cfg.get("limit")
    if limit is None and rate_bps:
        limit = int(burst + rate_bps * 0.005)
    return {"shaper": shaper, "rate": rate, "rate_bytes_per_second": rate_bps,
            "rate_from": "the run's config" if "rate" in cfg else "run's default",
            "burst_bytes": burst, "burst_from": source, "limit_bytes": limit}


STALL = 2.0   # measured/model above this: a PS stall (see note())
NOISY = 2 * TOLERANCE   # a point's jobs differing by more than this: noisy (note())
PLAIN, BUCKET = "alpha-beta", "alpha-beta+bucket"


def analyse(rows, link, config=None):
    """Both models on `rows`: plain alpha-beta and, where the link has a
    bucket, alpha-beta with it, each with its own fit on the ring's points.
    The rows get model_seconds and measured_over_model of the model the
    plots use (the bucket one when there is a bucket), plain_model_seconds
    and plain_measured_over_model, and a note on why a point lies outside
    the tolerance, where known (note())."""
    burst, rate = link["burst_bytes"], link["rate_bytes_per_second"]
    try:
        fits = {PLAIN: fit(rows)}
        if burst > 0:
            fits[BUCKET] = fit(rows, burst, rate)
    except FitError as e:
        die(str(e), 1)
    used = BUCKET if burst > 0 else PLAIN
    alpha, beta = fits[used]
    plain_alpha, plain_beta = fits[PLAIN]
    for r in rows:
        r["model_seconds"] = row_model(r, alpha, beta, burst, rate, flow=True)
        r["measured_over_model"] = r["time_seconds"] / r["model_seconds"]
        r["plain_model_seconds"] = row_model(r, plain_alpha, plain_beta)
        r["plain_measured_over_model"] = r["time_seconds"] / r["plain_model_seconds"]
        r["note"] = note(r, link)
    models = {}
    for name, (a, b) in fits.items():
        key = "measured_over_model" if name == used else "plain_measured_over_model"
        models[name] = {"alpha_seconds": a, "beta_bytes_per_second": b,
                        "burst_bytes": burst if name == BUCKET else 0,
                        "within_tolerance": within_tolerance(rows, key)}
    crossings = crossovers(rows, alpha, beta, burst, rate, fits[PLAIN])
    summary = {"model": used, "link": link, "alpha_seconds": alpha,
               "beta_bytes_per_second": beta, "models": models,
               "crossover_bytes": crossings,
               "crossover_agreement": crossover_agreement(crossings),
               "within_tolerance": within_tolerance(rows),
               "ring_flatness": ring_flatness(rows),
               "alpha_per_workers": per_workers_check(rows, beta, burst, rate, alpha),
               "rows": rows}
    if config is not None:
        summary["config"] = config
    return summary


def per_workers_check(rows, beta, burst, rate, alpha):
    """How many one-worker-per-host points lie within TOLERANCE of the
    plotted model with alpha fitted per N (alpha_per_workers(), a
    diagnostic) against with the one fitted alpha: whether the misses are
    the time per message growing with N, or something the model lacks.
    The rows keep the one alpha's model."""
    alphas = alpha_per_workers(rows, beta, burst, rate, alpha)
    out = {"alpha_seconds": {str(n): a for n, a in alphas.items()},
           "tolerance": TOLERANCE, "by_algorithm": {}}
    for r in rows:
        if not r["ok"] or r.get("per_host", 1) != 1 or r["workers"] not in alphas:
            continue
        t = r["time_seconds"] / row_model(r, alphas[r["workers"]], beta, burst, rate, flow=True)
        c = out["by_algorithm"].setdefault(r["algorithm"], {"within": 0, "one_alpha": 0, "of": 0})
        c["of"] += 1
        c["within"] += abs(t - 1) <= TOLERANCE
        c["one_alpha"] += abs(r["measured_over_model"] - 1) <= TOLERANCE
    for k in ("within", "one_alpha", "of"):
        out[k] = sum(c[k] for c in out["by_algorithm"].values())
    return out


def push_fan_in(alg, n, k, partition=None):
    """The most bytes one host receives in the first round of push/pull."""
    lat, msgs = pushpull_rounds(n, 1 if alg == "ps1" else n, k, partition)[0]
    into = [0.0] * n
    for _, dst, m in msgs:
        into[dst] += m
    return max(into)


def note(r, link):
    """Why an ok point lies outside the tolerance, where the data say:
      stall: push/pull more than STALL x the model while more bytes are
        pushed into one host at once than tbf's queue holds (limit): tbf
        drops, and TCP waits for a retransmission timeout (the README's
        check with an 8 MiB queue had no stall);
      queue: the same, up to STALL x the model: fewer drops (that check
        took ps1 at N = 8 and 4 MiB from 1.45x the model to 1.0x);
      noisy: the point was measured by several jobs (--repeats-small), they
        differ by more than NOISY (slowest / fastest - 1), and some job
        lies within the tolerance band or beyond it on the other side: the
        measurement itself is not stable to the tolerance, so where the
        median lies against the model says little (a point whose every job
        is off the same way is not noisy but off);
      latency: K <= 16 KiB, where the time is a few messages' latency, which
        varies from job to job on the shared machine (the ring's time per
        message there is not even monotonic in N);
      other: no known cause. Empty for points within the tolerance."""
    ratio = r["measured_over_model"]
    if not r["ok"] or abs(ratio - 1) <= TOLERANCE:
        return ""
    if (r["algorithm"] in ("ps1", "psN") and ratio > 1 and
            push_fan_in(r["algorithm"], r["workers"], r["bytes"],
                        r.get("ps_partition_bytes")) > (link["limit_bytes"] or 0)):
        return "stall" if ratio > STALL else "queue"
    jobs = r.get("repeat_seconds")
    model_s = r.get("model_seconds")
    if (jobs and len(jobs) > 1 and max(jobs) / min(jobs) - 1 > NOISY and
            (not model_s or (min(jobs) / model_s <= 1 + TOLERANCE and
                             max(jobs) / model_s >= 1 - TOLERANCE))):
        return "noisy"
    if r["bytes"] <= LATENCY_UPTO:
        return "latency"
    return "other"


def write_tables(out, summary):
    rows = summary["rows"]
    fields = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(os.path.join(out, "experiment.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        # repeat_seconds (a list) as "t1;t2;..."
        w.writerows({k: ";".join(map(str, v)) if isinstance(v, list) else v
                     for k, v in r.items()} for r in rows)
    with open(os.path.join(out, "experiment.json"), "w") as f:
        json.dump(summary, f, indent=1)


def within_tolerance(rows, key="measured_over_model"):
    """How many ok points lie within TOLERANCE of the model (rows[key] is
    measured/model), per algorithm; with the plotted model's key, also how
    many of the others each note() explains."""
    out = {"tolerance": TOLERANCE, "by_algorithm": {}}
    for r in rows:
        if not r["ok"]:
            continue
        name = r["algorithm"] + ("" if r.get("per_host", 1) == 1 else "/%dph" % r["per_host"])
        c = out["by_algorithm"].setdefault(name, {"within": 0, "of": 0})
        c["of"] += 1
        c["within"] += abs(r[key] - 1) <= TOLERANCE
    out["within"] = sum(c["within"] for c in out["by_algorithm"].values())
    out["of"] = sum(c["of"] for c in out["by_algorithm"].values())
    if key == "measured_over_model":
        out["outside_by_note"] = {}
        for r in rows:
            if r.get("note"):
                out["outside_by_note"][r["note"]] = out["outside_by_note"].get(r["note"], 0) + 1
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


def crossovers(rows, alpha, beta, burst=0, rate=None, plain=None):
    """Per N and small-message algorithm (hd, tree): the smallest measured
    size at which ring is faster and the interpolated crossing; the model's
    crossover and what follows it, "tie" or "ring" (model_crossover; None:
    never, 0: ring faster at every size) and, with `plain` = (alpha, beta),
    the plain alpha-beta model's. same_messages: the algorithm sends exactly
    the ring's messages at this N (hd at N = 2), so the model has the two
    equal and no crossover; a measured one is noise."""
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
            same = schedule(alg, n, 1 << 20) == schedule("ring", n, 1 << 20)

            def predict(a, b, s, flow):
                if same:
                    return None, None
                return model_crossover(
                    lambda k: model(alg, n, k, a, b, burst=s, rate=rate, flow=flow),
                    lambda k: model("ring", n, k, a, b, burst=s, rate=rate))
            c = {"measured": measured, "first_ring_win": first, "same_messages": same}
            c["model"], c["model_then"] = predict(alpha, beta, burst, True)
            if plain:
                c["model_plain"], c["model_plain_then"] = predict(plain[0], plain[1], 0, False)
            c["measured_over_model"] = (measured / c["model"]
                                        if measured and c["model"] else None)
            if c["model_then"] == "tie":
                # The model has the two equal past its crossover, so the
                # measured crossing is wherever noise first tips them;
                # where they first come within TIE_SLACK of each other
                # says more (a second view; the agreement counts both).
                tie = measured_crossover(sizes, ring, other, TIE_SLACK)[1]
                c["measured_tie"] = tie
                c["tie_over_model"] = tie / c["model"] if tie and c["model"] else None
            out["N%d %s" % (n, alg)] = c
    return out


def crossover_agreement(crossings, factor=2.0):
    """How many (N, algorithm) crossovers agree with the link model within
    `factor` (issue 8's target: 2x): both a size, measured/model within
    [1/factor, factor]; or both "ring faster at every size"; or both never.
    Pairs whose algorithm sends the ring's very messages are not counted
    (the model has no crossover there). {"within", "of", "factor",
    "outside": [[key, measured/model or None], ...], "within_counting_ties":
    within, plus the pairs outside whose model ends in a tie and whose
    measured_tie (within TIE_SLACK of each other) is within factor}."""
    within, outside, ties = 0, [], 0
    for key, c in sorted(crossings.items()):
        if c["same_messages"]:
            continue
        model_k, measured = c["model"], c["measured"]
        if model_k and measured:
            ok = 1 / factor <= measured / model_k <= factor
        elif model_k == 0:      # ring faster at every size
            ok = measured is None and c["first_ring_win"] is not None
        elif model_k is None:   # never
            ok = c["first_ring_win"] is None
        else:
            ok = False
        if ok:
            within += 1
        else:
            outside.append([key, measured / model_k if model_k and measured else None])
            tie = c.get("tie_over_model")
            ties += bool(tie and 1 / factor <= tie <= factor)
    return {"within": within, "of": within + len(outside), "factor": factor,
            "outside": outside, "within_counting_ties": within + ties}


def plot(out, summary):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = summary["rows"]
    flat = [r for r in rows if r.get("per_host", 1) == 1]
    fit_text = "model: %s\nfit: alpha = %.0f us, beta = %.0f MB/s" % (
        model_name(summary), summary["alpha_seconds"] * 1e6,
        summary["beta_bytes_per_second"] / 1e6)
    source = sources(summary)
    if source:
        fit_text += "\n" + source
    mine = run_label(summary.get("config"))
    plot_sizes(plt, out, flat, fit_text, summary["model"] == BUCKET, mine)
    plot_workers(plt, out, flat, fit_text, mine)
    names = ["time_vs_size.png", "time_vs_workers.png"]
    grouped = [r for r in rows if r.get("per_host", 1) > 1]
    if grouped:
        plot_hier(plt, out, grouped, fit_text, mine)
        names.append("hier_vs_ring.png")
    print("wrote " + ", ".join(os.path.join(out, n) for n in names))


def sources(summary):
    """Which run measured which points, for titles and the report: "" when
    every point is from one run. This run's points are drawn solid, the
    others hollow."""
    rows = summary["rows"]
    mine = run_label(summary.get("config"))
    counts = {}
    for r in rows:
        label = r.get("source") or mine
        counts[label] = counts.get(label, 0) + 1
    if set(counts) <= {mine}:
        return ""
    return "%d points from this run (%s), %d (hollow) from earlier ones (%s)" % (
        counts.get(mine, 0), mine, len(rows) - counts.get(mine, 0),
        ", ".join("%s: %d" % (k, v) for k, v in sorted(counts.items()) if k != mine))


def fit_sources(summary):
    """Which runs the fit rests on: the one-worker-per-host ring points it
    uses, by source, for alpha (<= 16 KiB) and beta (>= 1 MiB)."""
    mine = run_label(summary.get("config"))
    parts = []
    for name, pick in (("alpha", lambda k: k <= LATENCY_UPTO),
                       ("beta", lambda k: k >= BANDWIDTH_FROM)):
        counts = {}
        for r in ring_rows(summary["rows"]):
            if pick(r["bytes"]):
                label = r.get("source") or mine
                counts[label] = counts.get(label, 0) + 1
        parts.append("%s from %s" % (name, ", ".join(
            "%d ring points of %s" % (v, "this run" if k == mine else "the %s run" % k)
            for k, v in sorted(counts.items())) or "no ring points"))
    return "; ".join(parts)


def model_name(summary):
    """The plotted model, for titles (tree and push/pull are simulated
    message by message, the others in rounds)."""
    if summary["model"] == BUCKET:
        return ("alpha-beta + %s token bucket (tbf), tree and push/pull message by message"
                % human(summary["link"]["burst_bytes"]))
    return "alpha-beta, tree and push/pull message by message"


def series(rows, alg, key, value):
    return sorted((r[key], r[value], r) for r in rows if r["algorithm"] == alg)


def draw(ax, pts, alg, label, mine=None):
    """Measured points solid, their model dashed, in the algorithm's colour;
    points taken from an earlier run (--base) hollow."""
    xs = [p[0] for p in pts]
    ax.plot(xs, [p[1] * 1e3 for p in pts], "o-", color=STYLE[alg], label=label)
    old = [p for p in pts if p[2].get("source") not in (None, mine)]
    if old:
        ax.plot([p[0] for p in old], [p[1] * 1e3 for p in old], "o", color=STYLE[alg],
                markerfacecolor="white")
    ax.plot(xs, [p[2]["model_seconds"] * 1e3 for p in pts], "--",
            color=STYLE[alg], alpha=0.7)


def finish(ax, title):
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="measured (solid), model (dashed)", fontsize=8, title_fontsize=8)
    ax.set_title(title, fontsize=10)


def save(fig, path, suptitle=None):
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_sizes(plt, out, rows, fit_text, bucket, mine=None):
    """Time against size, one panel per N; with the bucket model, the ring's
    plain alpha-beta line dotted for comparison."""
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
                draw(ax, pts, alg, alg, mine)
        ring = series([r for r in rows if r["workers"] == n], "ring", "bytes", "time_seconds")
        if bucket and ring:
            ax.plot([p[0] for p in ring], [p[2]["plain_model_seconds"] * 1e3 for p in ring],
                    ":", color="0.4", label="ring, plain alpha-beta")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tensor size K (bytes)")
        ax.set_ylabel("time per operation (ms)")
        finish(ax, "N = %d workers" % n)
    save(fig, os.path.join(out, "time_vs_size.png"),
         "Allreduce / push-pull time against size on emulated links\n" + fit_text)


def plot_workers(plt, out, rows, fit_text, mine=None):
    """Time against N at the largest size."""
    kmax = max(r["bytes"] for r in rows)
    fig, ax = plt.subplots(figsize=(7.6, 4.6))
    for alg in SWEEP:
        pts = series([r for r in rows if r["bytes"] == kmax], alg, "workers", "time_seconds")
        if pts:
            draw(ax, pts, alg, alg, mine)
    ax.set_xlabel("workers N (one per emulated host)")
    ax.set_ylabel("time per operation (ms)")
    ax.set_xticks(sorted({r["workers"] for r in rows}))
    finish(ax, "%s tensor, time against N\n%s" % (human(kmax), fit_text))
    save(fig, os.path.join(out, "time_vs_workers.png"))


def plot_hier(plt, out, rows, fit_text, mine=None):
    """Hierarchical against ring with several workers per host, time against
    N at the largest and at a middle size."""
    sizes = sorted({r["bytes"] for r in rows})
    picks = sorted({sizes[-1], sizes[len(sizes) // 2]})
    fig, axes = plt.subplots(1, len(picks), figsize=(6 * len(picks), 4.4), squeeze=False)
    per_host = rows[0]["per_host"]
    for ax, k in zip(axes[0], picks):
        for alg in ("ring", "hier"):
            pts = series([r for r in rows if r["bytes"] == k], alg, "workers", "time_seconds")
            if pts:
                draw(ax, pts, alg, alg, mine)
        ax.set_xlabel("workers N (%d per emulated host)" % per_host)
        ax.set_ylabel("time per allreduce (ms)")
        ax.set_xticks(sorted({r["workers"] for r in rows}))
        ax.set_ylim(bottom=0)
        finish(ax, "%s, %d workers per host" % (human(k), per_host))
    save(fig, os.path.join(out, "hier_vs_ring.png"),
         "Hierarchical vs ring allreduce\n" + fit_text)


def human(k):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if k >= 1 << shift and k % (1 << shift) == 0:
            return "%d %s" % (k >> shift, unit)
    return "%d B" % k


def report(summary):
    rows, link = summary["rows"], summary["link"]
    print("link: %s at %s (%s); bucket %d B (%s)" % (
        link["shaper"], link["rate"], link["rate_from"], link["burst_bytes"], link["burst_from"]))
    if sources(summary):
        bases = summary["config"].get("base") or []
        print(sources(summary).replace("(hollow) ", "") + "; --base " +
              ", ".join(b["dir"] for b in bases))
        print("the fit rests on: " + fit_sources(summary))
    for name, m in summary["models"].items():
        print("fit, %s%s: alpha %.1f us, beta %.1f MB/s (relative least squares over the "
              "ring's points)" % (name, " (plotted)" if name == summary["model"] else "",
                                  m["alpha_seconds"] * 1e6, m["beta_bytes_per_second"] / 1e6))
    plain = summary["model"] != PLAIN
    print("%3s %2s %-5s %12s %10s %10s %8s%s" % (
        "N", "ph", "alg", "bytes", "time_ms", "model_ms", "meas/mod",
        " plain" if plain else ""))
    for r in rows:
        jobs = r.get("repeat_seconds")
        print("%3d %2d %-5s %12d %10.3f %10.3f %8.2f%s%s%s%s%s" % (
            r["workers"], r.get("per_host", 1), r["algorithm"], r["bytes"],
            r["time_seconds"] * 1e3, r["model_seconds"] * 1e3, r["measured_over_model"],
            " %5.2f" % r["plain_measured_over_model"] if plain else "",
            " * " + r["note"] if r["note"] else "", "" if r["ok"] else " FAILED",
            "  (median of %d jobs, %.3f-%.3f ms)" % (len(jobs), jobs[0] * 1e3, jobs[-1] * 1e3)
            if jobs else "",
            "  (%d job(s) wrote no results)" % r["jobs_missing"] if r.get("jobs_missing") else ""))
    for name, m in summary["models"].items():
        w = m["within_tolerance"]
        print("within %d%% of the %s model: %d of %d points (%s)%s" % (
            round(w["tolerance"] * 100), name, w["within"], w["of"], ", ".join(
                "%s %d/%d" % (k, c["within"], c["of"])
                for k, c in sorted(w["by_algorithm"].items())),
            "; * marks the others" if name == summary["model"] else ""))
    outside = {}
    for r in rows:
        if r["note"]:
            outside.setdefault(r["note"], []).append(r)
    why = {"stall": "push/pull > %gx the model with more pushed into one host than the "
                    "%s B queue: tbf drops, TCP retransmission timeouts" % (
                        STALL, link["limit_bytes"]),
           "queue": "push/pull above the model (up to %gx) with more pushed into one host "
                    "than the queue: fewer drops" % STALL,
           "latency": "<= %s: a few messages' latency, which varies from job to job "
                      "(the ring's time per message there: %s us across N; fit: %.0f us)" % (
                          human(LATENCY_UPTO), per_message_range(rows),
                          summary["alpha_seconds"] * 1e6),
           "noisy": "the point's own jobs differ by more than %d%% (slowest / fastest), "
                    "more than the tolerance allows" % round(NOISY * 100),
           "other": "no known cause"}
    for key in ("stall", "queue", "noisy", "latency", "other"):
        if key in outside:
            print("outside, %s (%d): %s. %s" % (key, len(outside[key]), why[key], ", ".join(
                "%s N=%d%s %s %.2f" % (r["algorithm"], r["workers"],
                                       "x%d" % r["per_host"] if r.get("per_host", 1) > 1 else "",
                                       human(r["bytes"]), r["measured_over_model"])
                for r in outside[key])))
    per_n = summary.get("alpha_per_workers")
    if per_n and per_n["of"]:
        print("diagnostic, alpha fitted per N from that N's ring points (%s us at N = %s): "
              "%d of %d one-worker-per-host points within %d%% (one alpha: %d; %s)" % (
                  ", ".join("%.0f" % (a * 1e6) for a in per_n["alpha_seconds"].values()),
                  ",".join(per_n["alpha_seconds"]), per_n["within"], per_n["of"],
                  round(per_n["tolerance"] * 100), per_n["one_alpha"], ", ".join(
                      "%s %d/%d" % (k, c["within"], c["of"])
                      for k, c in sorted(per_n["by_algorithm"].items()))))
    flat = summary["ring_flatness"]
    if flat:
        print("ring at %s, time / (2(N-1)/N): %s ms; spread %.1f%%" % (
            human(flat["bytes"]), ", ".join("N=%s %.1f" % (n, t * 1e3) for n, t in
                                           sorted(flat["normalised_seconds"].items())),
            flat["spread"] * 100))
    for key, c in summary["crossover_bytes"].items():
        print("crossover %s: ring faster from %s bytes measured (crossing at %s); model %s%s%s" % (
            key, c["first_ring_win"], "%.0f" % c["measured"] if c["measured"] else "-",
            "-, the same messages as the ring" if c["same_messages"]
            else model_crossover_text(c["model"], c["model_then"]), ratio_text(c),
            "; plain alpha-beta %s" % model_crossover_text(c["model_plain"],
                                                           c["model_plain_then"])
            if plain and not c["same_messages"] else ""))
    agree = summary.get("crossover_agreement")
    if agree and agree["of"]:
        print("crossovers within %gx of the model: %d of %d%s" % (
            agree["factor"], agree["within"], agree["of"],
            " (outside: %s)" % ", ".join(
                "%s %s" % (k, "%.2f" % r if r is not None else "no crossing")
                for k, r in agree["outside"]) if agree["outside"] else ""))
        ties = {k: c for k, c in summary["crossover_bytes"].items() if "measured_tie" in c}
        if ties and "within_counting_ties" in agree:
            print("where the model ends in a tie, the size from which the two are within "
                  "%d%% of each other: %s; counting those: %d of %d within %gx" % (
                      round(TIE_SLACK * 100), ", ".join(
                          "%s %s" % (k, "%.0f (%.2fx the model)" % (c["measured_tie"],
                                                                     c["tie_over_model"])
                                     if c["tie_over_model"] else "-")
                          for k, c in sorted(ties.items())),
                      agree["within_counting_ties"], agree["of"], agree["factor"]))


def per_message_range(rows):
    """Smallest and largest time / 2(N-1) of the ring's points <= 16 KiB."""
    per = [r["time_seconds"] / (2 * (r["workers"] - 1)) for r in ring_rows(rows)
           if r["bytes"] <= LATENCY_UPTO]
    return "%.0f-%.0f" % (min(per) * 1e6, max(per) * 1e6) if per else "-"


def model_crossover_text(k, then=None):
    if k is None:
        return "never"
    if k == 0:
        return "ring faster at every size"
    return "%.0f%s" % (k, {"tie": " (then equal)", "ring": ""}.get(then, ""))


def ratio_text(c):
    if not c["measured_over_model"]:
        return ""
    return " (measured/model %.2f)" % c["measured_over_model"]


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def exit_on_sigterm():
    """SIGTERM (e.g. from `timeout`) as SystemExit, so that Cluster's exit
    still tears the emulated hosts down."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def main(argv):
    exit_on_sigterm()
    cmd, opts = parse_args(argv)
    if cmd == "run":
        if opts["base"] and opts["base"] != "none":
            read_base(opts["base"], run_config(opts))   # before the sweep, not after
        run(opts)
    rows, config = collect(opts["out"])
    base = opts["base"]
    if not base and cmd == "plot":
        base = remembered_base(opts["out"])
        if base:
            print("merging with the earlier run this directory was drawn with: --base=%s "
                  "(--base=none draws this run alone)" % base)
    if base and base != "none":
        rows, config = merge_base(rows, config, base)
    link = shaping(opts["burst"] if cmd == "plot" else None, config)
    summary = analyse(rows, link, config)
    write_tables(opts["out"], summary)
    report(summary)
    if not have_matplotlib():
        print("no matplotlib here: tables written, no plots (run `plot` where python3-matplotlib is)")
        return
    plot(opts["out"], summary)


if __name__ == "__main__":
    main(sys.argv[1:])
