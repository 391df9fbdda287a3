#!/usr/bin/env python3
"""The training half of the experiment (issue 8, item 3): the four modes on
Fashion-MNIST, loss and test accuracy against wall-clock time, samples/s
against N.

  python3 bench/experiments/experiment_train.py run  [--workers=1,2,4,8] [--epochs=3]
                                         [--curves=4] [--out=DIR]
                                         [--build-dir=build] [--data-dir=DIR]
                                         [--model=mlp:784-256-128-10]
                                         [--data=fashion-mnist]
                                         [--pairs=ps-sync,ps-async,allreduce-sync,allreduce-async]
                                         [--train-limit=0]
                                         [--network=loopback|emulated]
                                         [--rate=1gbit] [--burst=73728]
                                         [--limit=8388608]
  python3 bench/experiments/experiment_train.py plot [--out=DIR] [--curves=4]

`run` with --network=loopback (the default) calls `gradsync local --compare`
once per N (a local cluster of N worker processes, one PS shard). With
--network=emulated (root) it brings up 1 + N emulated hosts per N instead
(bench/experiments/netem-cluster.sh, as bench/experiments/experiment.py does: every host's link
shaped to --rate by tbf with a --burst bucket and a --limit queue, the
coordinator on h0, a worker and a PS shard on each other host) and submits
the four modes from h0 one after another (`gradsync submit --wait`; PS jobs
use one shard, on h1, as `local` uses one). Either way each job runs
--epochs epochs and its results JSON is kept, whose "timeline" holds the
loss at every progress report and the test accuracy at every epoch end, on
the client's wall clock from the moment the job ran (client/timeline.h);
DIR/config.json and every train-N file record the network (plot refuses a
directory that mixes networks). --data-dir is the Fashion-MNIST
directory (loopback: `local --data_dir`; emulated: every worker's
--data_dir). --model and --data go to every job as given, so
--model=torchscript:PATH and --data=tensors:PATH (docs/user-guide.md "Your
own model") compare the modes on your own model: the client uploads the
files (on emulated hosts, PATH is read on h0). Then it does what `plot` does:

  DIR/train.csv            one row per (N, mode): samples/s, wall s, accuracy, ...
  DIR/train.json           the same rows, and the curves of the --curves run
  DIR/train_curves.png     loss and test accuracy against wall-clock seconds,
                           four modes, N = --curves
  DIR/train_throughput.png samples/s against N per mode, with N x (one
                           worker's samples/s) dashed as perfect scaling

The run is on one machine: all N workers share its cores, so samples/s
against N says how each mode's communication and synchronisation cost grow
with N there (on loopback), or on links of --rate (emulated), not what N
machines would reach.
"""

import csv
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# What bench/experiments/experiment.py's package shares with this command.
from experiment_model import DEFAULT_BURST  # noqa: E402
from gradsync_experiment import common  # noqa: E402
from gradsync_experiment.cli import parse_command  # noqa: E402
from gradsync_experiment.plots import have_matplotlib  # noqa: E402
from gradsync_experiment.sweep import Cluster, exit_on_sigterm  # noqa: E402

MODES = ["ps-sync", "ps-async", "allreduce-sync", "allreduce-async"]
STYLE = {"ps-sync": "C3", "ps-async": "C1", "allreduce-sync": "C0", "allreduce-async": "C2"}
FIELDS = ["workers", "mode", "state", "samples_per_second", "wall_seconds",
          "test_accuracy", "final_train_loss", "comm_seconds",
          "exposed_comm_seconds", "epochs"]


def die(msg, code=2):
    common.die(msg, code, prog="experiment_train")


def parse_args(argv):
    cmd, opts = parse_command(argv, __doc__, {
        "workers": "1,2,4,8", "epochs": "3", "curves": "4",
        "out": "experiment-results", "build-dir": "build", "data-dir": "",
        "model": "mlp:784-256-128-10", "data": "fashion-mnist", "pairs": ",".join(MODES),
        "train-limit": "0", "network": "loopback", "rate": "1gbit",
        "burst": str(DEFAULT_BURST), "limit": "8388608"},
        "experiment_train")
    try:
        opts["workers"] = [int(n) for n in opts["workers"].split(",")]
        opts["epochs"] = int(opts["epochs"])
        opts["curves"] = int(opts["curves"])
        opts["train-limit"] = int(opts["train-limit"])
    except ValueError:
        die("--workers, --epochs, --curves and --train-limit take integers")
    if any(n < 1 or n > 64 for n in opts["workers"]):
        die("--workers: each N must be 1..64")
    if opts["epochs"] < 1:
        die("--epochs must be at least 1")
    if opts["network"] not in ("loopback", "emulated"):
        die("--network must be loopback or emulated")
    for flag in ("burst", "limit"):
        if not opts[flag].isdigit():
            die("--%s takes a byte count, got %r" % (flag, opts[flag]))
    for mode in opts["pairs"].split(","):
        if mode not in MODES:
            die("--pairs: unknown mode %s (want %s)" % (mode, ",".join(MODES)))
    return cmd, opts


def mode_of(job):
    return common.mode_label(job)


CONFIG_NAME = "config.json"


def network_config(opts):
    """What the run's network was (DIR/config.json; plot titles name it)."""
    if opts["network"] == "loopback":
        return {"network": "loopback"}
    return {"network": "emulated", "shaper": "tbf", "rate": opts["rate"],
            "burst": int(opts["burst"]), "limit": int(opts["limit"])}


def run(opts):
    """Runs every N; returns what failed (empty: every job succeeded)."""
    binary = os.path.join(ROOT, opts["build-dir"], "bin", "gradsync")
    if not os.access(binary, os.X_OK):
        die("%s not found: build first (bash deploy/build.sh)" % binary, 1)
    if opts["network"] == "emulated" and os.geteuid() != 0:
        die("run --network=emulated needs root (network namespaces)")
    os.makedirs(opts["out"], exist_ok=True)
    with open(os.path.join(opts["out"], CONFIG_NAME), "w") as f:
        json.dump(network_config(opts), f, indent=1)
    if opts["network"] == "emulated":
        return run_emulated(opts)
    failed = []
    for n in opts["workers"]:
        out = os.path.abspath(os.path.join(opts["out"], "train-N%d.json" % n))
        cmd = [binary, "local", "--compare", "--workers=%d" % n,
               "--epochs=%d" % opts["epochs"], "--model=" + opts["model"],
               "--data=" + opts["data"],
               "--pairs=" + opts["pairs"], "--quiet", "--results=" + out]
        if opts["train-limit"] > 0:
            cmd.append("--train_limit=%d" % opts["train-limit"])
        if opts["data-dir"]:
            cmd.append("--data_dir=" + opts["data-dir"])
        print("=== N=%d: %s" % (n, " ".join(cmd[1:])), flush=True)
        rc = subprocess.run(cmd).returncode
        if rc != 0:
            failed.append("N=%d exited %d" % (n, rc))
        try:   # the network beside the jobs, so that collect() can check it
            with open(out) as f:
                d = json.load(f)
            d["network"] = network_config(opts)
            with open(out, "w") as f:
                json.dump(d, f, indent=1)
        except (OSError, ValueError):
            failed.append("N=%d wrote no results" % n)
    return failed


def run_emulated(opts):
    """The four modes from h0 of 1 + N emulated hosts, per N; the jobs of one
    N go into train-N<N>.json as `local --compare` writes them, with the
    network. A job that wrote no results stays in the table as NO_RESULTS."""
    copts = {"rate": opts["rate"], "shaper": "tbf", "burst": opts["burst"],
             "limit": opts["limit"], "build-dir": opts["build-dir"],
             "data-dir": opts["data-dir"]}
    failed = []
    for n in opts["workers"]:
        jobs = []
        with Cluster(copts, n + 1, 1) as c:
            for mode in opts["pairs"].split(","):
                strategy, sync = mode.split("-")
                one = os.path.join(c.state, "job.json")
                cmd = [c.binary, "submit", "--server=" + c.server,
                       "--strategy=" + strategy, "--mode=" + sync, "--workers=%d" % n,
                       "--epochs=%d" % opts["epochs"], "--model=" + opts["model"],
                       "--data=" + opts["data"],
                       "--wait", "--quiet", "--results=" + one]
                if strategy == "ps":
                    cmd.append("--ps_shards=1")
                if opts["train-limit"] > 0:
                    cmd.append("--train_limit=%d" % opts["train-limit"])
                print("=== N=%d %s: %s" % (n, mode, " ".join(cmd[1:])), flush=True)
                rc = subprocess.run(c.cmd + ["run"] + c.flags + ["0"] + cmd).returncode
                if rc != 0:
                    failed.append("N=%d %s exited %d" % (n, mode, rc))
                try:
                    with open(one) as f:
                        jobs.append(json.load(f))
                    os.remove(one)
                except (OSError, ValueError):
                    failed.append("N=%d %s wrote no results" % (n, mode))
                    jobs.append({"strategy": strategy, "mode": sync, "state": "NO_RESULTS",
                                 "error": "gradsync submit exited %d" % rc})
        with open(os.path.join(opts["out"], "train-N%d.json" % n), "w") as f:
            json.dump({"network": network_config(opts), "jobs": jobs}, f, indent=1)
    return failed


def network_text(config):
    if config.get("network") == "emulated":
        return "emulated hosts, %s links (tbf)" % config.get("rate", "?")
    return "loopback, one machine"


def collect(out):
    """Rows per (N, mode), the jobs by (N, mode), and the network the results
    were measured on (each train-N file records it; files from before that
    are loopback). Results from different networks in one directory are an
    error: their rows would be drawn as one experiment."""
    rows, jobs, networks = [], {}, {}
    if not os.path.isdir(out):
        die("no directory %s" % out, 1)
    for name in sorted(os.listdir(out)):
        m = re.fullmatch(r"train-N(\d+)\.json", name)
        if not m:
            continue
        path = os.path.join(out, name)
        d = common.read_json(path, prog="experiment_train")
        try:
            networks[name] = d.get("network") or {"network": "loopback"}
            for job in d.get("jobs", []):
                n = int(m.group(1))
                jobs[(n, mode_of(job))] = job
                row = {k: job.get(k) for k in FIELDS if k in job}
                row.update({"workers": n, "mode": mode_of(job),
                            "epochs": len(job.get("per_epoch", []))})
                rows.append(row)
        except (KeyError, TypeError, AttributeError) as e:
            die("%s is not a train-N results file (%s: %s)" % (path, type(e).__name__, e), 1)
    if not rows:
        die("no train-N<workers>.json results in %s (run first)" % out, 1)
    kinds = sorted({json.dumps(v, sort_keys=True) for v in networks.values()})
    if len(kinds) > 1:
        die("%s holds results from different networks (%s): use one directory per "
            "network" % (out, "; ".join("%s: %s" % (k, network_text(v))
                                        for k, v in sorted(networks.items()))), 1)
    rows.sort(key=lambda r: (r["workers"], MODES.index(r["mode"])
                             if r["mode"] in MODES else 99))
    return rows, jobs, json.loads(kinds[0])


def write_tables(out, rows, jobs, curves_n, network):
    with open(os.path.join(out, "train.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k) for k in FIELDS})
    curves = {mode: job.get("timeline") for (n, mode), job in jobs.items()
              if n == curves_n}
    with open(os.path.join(out, "train.json"), "w") as f:
        json.dump({"network": network, "rows": rows, "curves_workers": curves_n,
                   "curves": curves}, f, indent=1)


def plot_curves(plt, out, jobs, n, net):
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode in MODES:
        job = jobs.get((n, mode))
        if not job or job.get("state") != "SUCCEEDED" or not job.get("timeline"):
            continue
        tl = job["timeline"]
        pts = [(p["t"], p["loss"]) for p in tl["progress"] if p["loss"] > 0]
        ax_loss.plot([p[0] for p in pts], [p[1] for p in pts], "-", color=STYLE[mode],
                     label="%s (%.0f samples/s)" % (mode, job["samples_per_second"]))
        eps = tl["epochs"]
        ax_acc.plot([e["t"] for e in eps], [e["test_accuracy"] for e in eps], "o-",
                    color=STYLE[mode], label=mode)
    ax_loss.set_xlabel("wall-clock time since the job started (s)")
    ax_loss.set_ylabel("training loss (rank 0, mean since last report)")
    ax_loss.set_yscale("log")
    ax_loss.set_title("Training loss, N = %d workers\n%s" % (n, net), fontsize=10)
    ax_acc.set_xlabel("wall-clock time since the job started (s)")
    ax_acc.set_ylabel("test accuracy (10k images, after each epoch)")
    ax_acc.set_title("Test accuracy, N = %d workers\n%s" % (n, net), fontsize=10)
    for ax in (ax_loss, ax_acc):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "train_curves.png"), dpi=110)


def plot_throughput(plt, out, rows, net, emulated):
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ns = sorted({r["workers"] for r in rows})
    for mode in MODES:
        pts = sorted((r["workers"], r["samples_per_second"]) for r in rows
                     if r["mode"] == mode and r.get("state") == "SUCCEEDED")
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=STYLE[mode],
                label=mode)
        if pts[0][0] == 1:
            ax.plot([p[0] for p in pts], [p[0] * pts[0][1] for p in pts], "--",
                    color=STYLE[mode], alpha=0.5)
    ax.set_xlabel("workers N (one per emulated host)" if emulated
                  else "workers N (processes on one machine)")
    ax.set_ylabel("training throughput (samples/s, whole job)")
    ax.set_xticks(ns)
    ax.set_title("Samples/s against N (dashed: N x one worker)\n%s" % net, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "train_throughput.png"), dpi=110)


def plot(out, rows, jobs, curves_n, network):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    net = network_text(network)
    if any(n == curves_n for n, _ in jobs):
        plot_curves(plt, out, jobs, curves_n, net)
    plot_throughput(plt, out, rows, net, network.get("network") == "emulated")
    print("wrote %s/train.csv, train.json, train_curves.png, train_throughput.png" % out)


def report(rows):
    print("%3s %-11s %10s %8s %9s %10s %8s %9s" % (
        "N", "mode", "samples/s", "wall_s", "test_acc", "final_loss", "comm_s",
        "exposed_s"))
    for r in rows:
        print("%3d %-11s %10.0f %8.2f %9.4f %10.4f %8.2f %9.2f%s" % (
            r["workers"], r["mode"], r.get("samples_per_second") or 0,
            r.get("wall_seconds") or 0, r.get("test_accuracy") or 0,
            r.get("final_train_loss") or 0, r.get("comm_seconds") or 0,
            r.get("exposed_comm_seconds") or 0,
            "" if r.get("state") == "SUCCEEDED" else "  " + str(r.get("state"))))


def main(argv):
    exit_on_sigterm()
    cmd, opts = parse_args(argv)
    failed = run(opts) if cmd == "run" else []
    rows, jobs, network = collect(opts["out"])
    write_tables(opts["out"], rows, jobs, opts["curves"], network)
    report(rows)
    if not have_matplotlib():
        print("no matplotlib here: tables written, no plots "
              "(run `plot` where python3-matplotlib is)")
    else:
        plot(opts["out"], rows, jobs, opts["curves"], network)
    if failed:
        die("not every job succeeded: " + "; ".join(failed), 1)


if __name__ == "__main__":
    main(sys.argv[1:])
