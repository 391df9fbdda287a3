"""The plots, DIR/*.png (matplotlib, imported only to draw): time against
size per N, time against N at the largest size, and hierarchical against
ring where there are several workers per host."""

import os

from .analysis import BUCKET
from .report import human, sources
from .results import run_label
from .sweep import SWEEP

STYLE = {"ring": "C0", "hd": "C1", "tree": "C2", "ps1": "C3", "psN": "C4", "hier": "C5"}


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


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
