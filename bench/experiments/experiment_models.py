#!/usr/bin/env python3
"""PS or ring for *your* model: the example TorchScript models side by side,
with the alpha-beta model's verdict beside the measured one (issue 35).

  python3 bench/experiments/experiment_models.py run    [--models=lenet,resnet,charlm]
                                            [--workers=4] [--epochs=1]
                                            [--train-limit=12000] [--iters=20]
                                            [--out=DIR] [--build-dir=build]
                                            [--data-dir=DIR]
  python3 bench/experiments/experiment_models.py plot   [--out=DIR]

`run` does, for each N of --workers, on loopback (`gradsync local`):
  1. writes each model of --models with its script in examples/models/
     (Debian's python3-torch; /usr/bin/python3) into DIR/models/, and counts
     its parameters: K = 4 x parameters bytes of gradient per step;
  2. times the two collectives alone at every model's K, as bench jobs on a
     cluster of N workers: the ring allreduce (`local bench --op=allreduce
     --algorithm=ring`) and one PS shard's push and pull (`--op=pushpull
     --ps_shards=1`), --iters runs each. Each bench job also measures the
     link by ping-pong (alpha: seconds per message, beta: bytes per second);
  3. trains each model ps-sync and allreduce-sync (`local --compare
     --pairs=ps-sync,allreduce-sync --algorithm=ring`) for --epochs epochs on at
     most --train-limit samples.
Then it does what `plot` does: for each model and N,

  predicted   the alpha-beta model (common/cost_model.h, as
              bench/experiments/experiment_model.py computes it) of one step of each
              strategy with the ping-pong's alpha and beta: the same compute
              (the mean of the two sync jobs' measured compute per step)
              plus the predicted collective, nothing overlapped;
  collective  the bench jobs' measured collective at K;
  training    the measured step of each sync job (N x batch / samples/s),

each with its winner (within 5 % is a tie), and where the winner changes:
the K at which the model has the ring overtake one PS at that N, alpha and
beta (below it PS's 2 messages beat the ring's 2(N-1); above it the PS
link's N x K bytes lose), and which models lie on which side. It writes

  DIR/models.csv, DIR/models.json   one row per (model, N)
  DIR/models.png                    PS time / ring time per model: the
                                    alpha-beta step, the collective alone,
                                    the training step, and the alpha-beta
                                    step on 1 Gbit links (matplotlib)
  and prints the table and the verdicts.

Models (--models, comma-separated; each the script and its arguments):
  lenet        examples/models/lenet.py, Fashion-MNIST
  resnet       examples/models/resnet.py, Fashion-MNIST
  charlm       examples/models/charlm.py (width 64), its licence-text corpus
  charlm-wide  charlm.py --width 256: a larger gradient on the same corpus
  mlp-tiny     examples/models/mlp.py --widths 784-10: 31 KB of gradient

All workers share this machine's cores, so compute per step grows with N
and loopback's alpha and beta are those of gRPC through the kernel, not of
a network; docs/experiments.md "Your own model" has the figures and what
they do and do not say.
"""

import csv
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from experiment_model import model, model_crossover, pushpull_model  # noqa: E402
from gradsync_experiment import common  # noqa: E402
from gradsync_experiment.cli import parse_command  # noqa: E402
from gradsync_experiment.plots import have_matplotlib  # noqa: E402

TORCH_PYTHON = "/usr/bin/python3"
TIE = 0.05
BATCH = 32   # local's --batch_size default, per worker
PRESETS = {
    "lenet": (["lenet.py"], "fashion-mnist"),
    "resnet": (["resnet.py"], "fashion-mnist"),
    "charlm": (["charlm.py"], "corpus"),
    "charlm-wide": (["charlm.py", "--width", "256"], "corpus"),
    "mlp-tiny": (["mlp.py", "--widths", "784-10"], "fashion-mnist"),
}
# What-if links for the alpha-beta verdict with the measured compute: the
# same model and N between hosts on 1 and 10 Gbit Ethernet (alpha: a
# message's latency through gRPC between hosts, as measured on the emulated
# links of docs/experiments.md).
LINKS = [("1gbit", 125e6, 100e-6), ("10gbit", 1.25e9, 50e-6)]
FIELDS = ["model", "workers", "params", "gradient_bytes", "alpha_seconds",
          "beta_bytes_per_second", "compute_ms", "model_ps_ms", "model_ring_ms",
          "model_winner", "bench_ps_ms", "bench_ring_ms", "bench_winner",
          "train_ps_ms", "train_ring_ms", "train_winner", "train_ps_compute_ms",
          "train_ring_compute_ms", "crossover_bytes", "agree"] + [
    "%s_%s" % (name, what) for name, _, _ in LINKS
    for what in ("ps_ms", "ring_ms", "winner", "crossover_bytes")]


def die(msg, code=2):
    common.die(msg, code, prog="experiment_models")


def parse_args(argv):
    cmd, opts = parse_command(argv, __doc__, {
        "models": "lenet,resnet,charlm", "workers": "4", "epochs": "1",
        "train-limit": "12000", "iters": "20", "out": "experiment-models",
        "build-dir": "build", "data-dir": ""}, prog="experiment_models")
    opts["models"] = [m for m in opts["models"].split(",") if m]
    for m in opts["models"]:
        if m not in PRESETS:
            die("--models: unknown model %s (want %s)" % (m, ",".join(PRESETS)))
    for flag in ("epochs", "train-limit", "iters"):
        try:
            opts[flag] = int(opts[flag])
        except ValueError:
            die("--%s takes a whole number, got %r" % (flag, opts[flag]))
        if opts[flag] < (0 if flag == "train-limit" else 1):
            die("--%s is too small: %d" % (flag, opts[flag]))
    try:
        opts["workers"] = [int(n) for n in opts["workers"].split(",")]
    except ValueError:
        die("--workers takes numbers, e.g. 2,4; got %r" % opts["workers"])
    if not opts["workers"] or min(opts["workers"]) < 2:
        die("--workers: PS and ring differ from 2 workers on")
    return cmd, opts


def winner(ps, ring):
    """'ps', 'ring' or 'tie' (within TIE of each other) for two times."""
    if ps is None or ring is None:
        return "?"
    if abs(ps - ring) <= TIE * max(ps, ring):
        return "tie"
    return "ps" if ps < ring else "ring"


def step_ms(job, workers):
    """A sync job's measured step in ms: its global batch (N x batch)
    samples per step."""
    sps = job.get("samples_per_second") or 0
    batch = job.get("global_batch") or workers * BATCH
    return 1e3 * batch / sps if sps > 0 else None


def compute_ms(job, workers):
    """Its compute per step: the step less the communication it waited for."""
    step = step_ms(job, workers)
    steps = job.get("steps") or 0
    exposed = job.get("exposed_comm_seconds")
    if step is None or steps <= 0 or exposed is None:
        return None
    return max(0.0, step - 1e3 * exposed / steps)


def bench_ms(bench, k):
    for r in bench.get("rows", []):
        if r["bytes"] == k and r["ok"]:
            return 1e3 * r["time_seconds"]
    return None


def analyse(name, n, params, ps_job, ring_job, ring_bench, pp_bench):
    """One row of models.csv from the results of one model at one N."""
    k = 4 * params
    alpha = ring_bench["alpha_seconds"]
    beta = ring_bench["beta_bytes_per_second"]
    computes = [c for c in (compute_ms(ps_job, n), compute_ms(ring_job, n)) if c is not None]
    comp = sum(computes) / len(computes) if computes else None
    m_ring = 1e3 * model("ring", n, k, alpha, beta)
    m_ps = 1e3 * pushpull_model(n, 1, k, alpha, beta)
    cross, _ = model_crossover(lambda b: pushpull_model(n, 1, int(b), alpha, beta),
                               lambda b: model("ring", n, b, alpha, beta))
    row = {
        "model": name, "workers": n, "params": params, "gradient_bytes": k,
        "alpha_seconds": alpha, "beta_bytes_per_second": beta, "compute_ms": comp,
        "model_ps_ms": None if comp is None else comp + m_ps,
        "model_ring_ms": None if comp is None else comp + m_ring,
        "bench_ps_ms": bench_ms(pp_bench, k), "bench_ring_ms": bench_ms(ring_bench, k),
        "train_ps_ms": step_ms(ps_job, n), "train_ring_ms": step_ms(ring_job, n),
        "crossover_bytes": cross,
    }
    row["model_winner"] = winner(row["model_ps_ms"], row["model_ring_ms"])
    row["bench_winner"] = winner(row["bench_ps_ms"], row["bench_ring_ms"])
    row["train_winner"] = winner(row["train_ps_ms"], row["train_ring_ms"])
    row["agree"] = row["model_winner"] == row["train_winner"]
    row["train_ps_compute_ms"] = compute_ms(ps_job, n)
    row["train_ring_compute_ms"] = compute_ms(ring_job, n)
    for link, b, a in LINKS:
        ps = None if comp is None else comp + 1e3 * pushpull_model(n, 1, k, a, b)
        ring = None if comp is None else comp + 1e3 * model("ring", n, k, a, b)
        row[link + "_ps_ms"], row[link + "_ring_ms"] = ps, ring
        row[link + "_winner"] = winner(ps, ring)
        row[link + "_crossover_bytes"] = model_crossover(
            lambda x: pushpull_model(n, 1, int(x), a, b),
            lambda x: model("ring", n, x, a, b))[0]
    return row


def fmt(v, spec="%.1f"):
    return "-" if v is None else spec % v


def crossover_text(cross):
    if cross is None:
        return "PS faster at every size"
    if cross == 0:
        return "ring faster at every size"
    return "%.0f KB" % (cross / 1e3)


def report(rows):
    lines = ["%-12s %2s %9s %9s %8s | %-23s | %-23s | %-23s | %s" % (
        "model", "N", "params", "K(KB)", "comp_ms", "alpha-beta ps/ring ms",
        "collective ps/ring ms", "training ps/ring ms", "agree")]
    for r in rows:
        def pair(a, b, w):
            return "%7s %7s %-7s" % (fmt(a), fmt(b), w)
        lines.append("%-12s %2d %9d %9.1f %8s | %s | %s | %s | %s" % (
            r["model"], r["workers"], r["params"], r["gradient_bytes"] / 1e3,
            fmt(r["compute_ms"]),
            pair(r["model_ps_ms"], r["model_ring_ms"], r["model_winner"]),
            pair(r["bench_ps_ms"], r["bench_ring_ms"], r["bench_winner"]),
            pair(r["train_ps_ms"], r["train_ring_ms"], r["train_winner"]),
            "yes" if r["agree"] else "NO"))
    for n in sorted({r["workers"] for r in rows}):
        at = [r for r in rows if r["workers"] == n]
        cross = at[0]["crossover_bytes"]
        lines.append(
            "N=%d, alpha %.0f us, beta %.2f GB/s (ping-pong): the model has the ring "
            "overtake one PS at K = %s; %s" % (
                n, at[0]["alpha_seconds"] * 1e6, at[0]["beta_bytes_per_second"] / 1e9,
                crossover_text(cross),
                "; ".join("%s (%.0f KB) %s" % (
                    r["model"], r["gradient_bytes"] / 1e3,
                    "below: PS side" if cross and r["gradient_bytes"] < cross
                    else "above: ring side") for r in at)))
    missed = [r for r in rows if not r["agree"]]
    if missed:
        lines.append("the model's verdict differs from training for: " + ", ".join(
            "%s N=%d (model %s, training %s, collective alone %s)" % (
                r["model"], r["workers"], r["model_winner"], r["train_winner"],
                r["bench_winner"]) for r in missed))
        for r in missed:
            why = differs_why(r)
            if why:
                lines.append("  %s N=%d: %s" % (r["model"], r["workers"], why))
    for link, b, a in LINKS:
        lines.append("on %s links (alpha %.0f us, beta %.2f GB/s) with this compute: %s" % (
            link, a * 1e6, b / 1e9, "; ".join(
                "%s N=%d %s (%s/%s ms)" % (
                    r["model"], r["workers"], r[link + "_winner"],
                    fmt(r[link + "_ps_ms"]), fmt(r[link + "_ring_ms"])) for r in rows)))
        for n in sorted({r["workers"] for r in rows}):
            at = [r for r in rows if r["workers"] == n]
            lines.append("  N=%d: the ring overtakes one PS at K = %s" % (
                n, crossover_text(at[0][link + "_crossover_bytes"])))
    return "\n".join(lines)


def differs_why(r):
    """Where the training's difference comes from, when the measured compute
    per step says it: the collectives are a small part of it."""
    ps, ring = r["train_ps_compute_ms"], r["train_ring_compute_ms"]
    tp, tr = r["train_ps_ms"], r["train_ring_ms"]
    if None in (ps, ring, tp, tr) or tp == tr:
        return ""
    share = (ps - ring) / (tp - tr)
    if share < 0.5:
        return ""
    return ("%.0f %% of the training's difference is compute (ps %.1f against ring "
            "%.1f ms a step), not communication: the PS shard's process shares "
            "this machine's cores with the workers, which the alpha-beta model "
            "does not count" % (100 * min(share, 1.0), ps, ring))


def python_for_torch():
    if not os.access(TORCH_PYTHON, os.X_OK):
        die("%s not found (install python3-torch: bash deploy/install-deps.sh)"
            % TORCH_PYTHON, 1)
    return TORCH_PYTHON


def write_model(name, out):
    """Writes the model (and corpus) into out/models; returns (model file,
    --data value, parameters)."""
    args, data = PRESETS[name]
    mdir = os.path.join(out, "models")
    os.makedirs(mdir, exist_ok=True)
    path = os.path.join(mdir, name + ".pt")
    cmd = [python_for_torch(), os.path.join(ROOT, "examples", "models", args[0]),
           "--out", path] + args[1:]
    if data == "corpus":
        corpus = os.path.join(mdir, "corpus.pt")
        cmd += ["--data-out", corpus]
        data = "tensors:" + corpus
    if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
        die("%s failed" % " ".join(cmd), 1)
    count = subprocess.run(
        [python_for_torch(), "-c", "import sys, torch; m = torch.jit.load(sys.argv[1]); "
         "print(sum(p.numel() for p in m.parameters()))", path],
        capture_output=True, text=True)
    if count.returncode != 0:
        die("cannot count the parameters of %s: %s" % (path, count.stderr.strip()), 1)
    return path, data, int(count.stdout)


def run_cmd(cmd, failed, what):
    print("=== " + " ".join(cmd[1:]), flush=True)
    rc = subprocess.run(cmd).returncode
    if rc != 0:
        failed.append("%s exited %d" % (what, rc))


def run(opts):
    binary = os.path.join(ROOT, opts["build-dir"], "bin", "gradsync")
    if not os.access(binary, os.X_OK):
        die("%s not found: build first (bash deploy/build.sh)" % binary, 1)
    out = os.path.abspath(opts["out"])
    os.makedirs(out, exist_ok=True)
    models = {}
    for name in opts["models"]:
        models[name] = write_model(name, out)
        print("%s: %d parameters, K = %d bytes" % (name, models[name][2], 4 * models[name][2]),
              flush=True)
    with open(os.path.join(out, "models-config.json"), "w") as f:
        json.dump({"models": {m: {"params": p, "data": d} for m, (_, d, p) in models.items()},
                   "epochs": opts["epochs"], "train_limit": opts["train-limit"],
                   "iters": opts["iters"], "network": "loopback"}, f, indent=1)
    extra = ["--data_dir=" + opts["data-dir"]] if opts["data-dir"] else []
    sizes = ",".join(str(4 * p) for _, _, p in models.values())
    failed = []
    for n in opts["workers"]:
        for op, flags in (("ring", ["--op=allreduce", "--algorithm=ring"]),
                          ("pushpull", ["--op=pushpull", "--ps_shards=1"])):
            run_cmd([binary, "local", "bench", "--workers=%d" % n, "--sizes=" + sizes,
                     "--iters=%d" % opts["iters"], "--warmup=3",
                     "--results=" + os.path.join(out, "bench-%s-N%d.json" % (op, n))]
                    + flags, failed, "bench %s N=%d" % (op, n))
        for name, (path, data, _) in models.items():
            cmd = [binary, "local", "--compare", "--pairs=ps-sync,allreduce-sync",
                   "--workers=%d" % n, "--epochs=%d" % opts["epochs"],
                   "--model=torchscript:" + path, "--data=" + data, "--algorithm=ring",
                   "--autotune=false", "--quiet",
                   "--results=" + os.path.join(out, "train-%s-N%d.json" % (name, n))] + extra
            if opts["train-limit"] > 0:
                cmd.append("--train_limit=%d" % opts["train-limit"])
            run_cmd(cmd, failed, "%s N=%d" % (name, n))
    return failed


def collect(out):
    """The rows of every (model, N) whose results are all in `out`."""
    config = common.read_json(os.path.join(out, "models-config.json"), "experiment_models")
    rows = []
    for name, m in config["models"].items():
        for f in sorted(os.listdir(out)):
            prefix = "train-%s-N" % name
            if not (f.startswith(prefix) and f.endswith(".json")):
                continue
            n = int(f[len(prefix):-len(".json")])
            train = common.read_json(os.path.join(out, f), "experiment_models")
            jobs = {common.mode_label(j): j for j in train.get("jobs", [])}
            ring_b = os.path.join(out, "bench-ring-N%d.json" % n)
            pp_b = os.path.join(out, "bench-pushpull-N%d.json" % n)
            if "ps-sync" not in jobs or "allreduce-sync" not in jobs or not (
                    os.path.exists(ring_b) and os.path.exists(pp_b)):
                print("experiment_models: %s N=%d is incomplete; left out" % (name, n),
                      file=sys.stderr)
                continue
            rows.append(analyse(name, n, m["params"], jobs["ps-sync"], jobs["allreduce-sync"],
                                common.read_json(ring_b, "experiment_models"),
                                common.read_json(pp_b, "experiment_models")))
    rows.sort(key=lambda r: (r["workers"], r["gradient_bytes"]))
    return rows


def write_tables(out, rows):
    with open(os.path.join(out, "models.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow(r)
    with open(os.path.join(out, "models.json"), "w") as f:
        json.dump({"rows": rows, "tie": TIE}, f, indent=1)


def plot(out, rows):
    if not have_matplotlib():
        print("experiment_models: python3-matplotlib missing; no models.png", file=sys.stderr)
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ns = sorted({r["workers"] for r in rows})
    fig, axes = plt.subplots(1, len(ns), figsize=(6 * len(ns), 4.2), squeeze=False)
    for ax, n in zip(axes[0], ns):
        at = [r for r in rows if r["workers"] == n]
        x = range(len(at))
        bars = [("model_ps_ms", "model_ring_ms", "alpha-beta, this machine", "C7"),
                ("bench_ps_ms", "bench_ring_ms", "the collective alone", "C2"),
                ("train_ps_ms", "train_ring_ms", "training, measured", "C0"),
                ("1gbit_ps_ms", "1gbit_ring_ms", "alpha-beta, 1 Gbit links", "C3")]
        for i, (ps, ring, label, color) in enumerate(bars):
            ax.bar([j + (i - 1.5) * 0.2 for j in x],
                   [r[ps] / r[ring] if r[ps] and r[ring] else 0 for r in at], 0.2,
                   label=label, color=color)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhspan(1 - TIE, 1 + TIE, color="k", alpha=0.08)
        ax.set_xticks(list(x))
        ax.set_xticklabels(["%s\n%.0f KB" % (r["model"], r["gradient_bytes"] / 1e3)
                            for r in at])
        ax.set_ylabel("PS time / ring time (> 1: ring faster)")
        ax.set_title("N = %d: sync step (collective: one allreduce or push-pull)" % n)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "models.png"), dpi=110)
    plt.close(fig)


def main(argv):
    cmd, opts = parse_args(argv)
    failed = run(opts) if cmd == "run" else []
    rows = collect(opts["out"])
    if not rows:
        die("no complete results in %s" % opts["out"], 1)
    write_tables(opts["out"], rows)
    plot(opts["out"], rows)
    print(report(rows))
    if failed:
        die("failed: " + "; ".join(failed), 1)


if __name__ == "__main__":
    main(sys.argv[1:])
