#!/usr/bin/env python3
"""Renders a merged gradsync trace (gradsync ... --trace) to a PNG timeline.

One row per (rank, thread), one coloured bar per complete event, a few steps
zoomed: the window starts at the training-thread span of --first_step on rank
0 and covers --steps steps. Instant events ("bucket ready") are drawn as ticks.

  python3 bench/trace_to_png.py trace.json docs/trace.png --first_step 20 --steps 3
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLORS = {
    "stage batch": "#9e9e9e",
    "forward": "#4caf50",
    "backward": "#2e7d32",
    "forward+backward": "#c8e6c9",
    "copy": "#ffb74d",
    "sync bucket": "#1e88e5",
    "wait comm": "#e53935",
    "optimizer": "#8e24aa",
    "loss + report": "#bdbdbd",
}


def base_name(name):
    for key in sorted(COLORS, key=len, reverse=True):
        if name == key or name.startswith(key + " "):
            return key
    return None


def window(events, first_step, steps):
    starts = [e["ts"] for e in events
              if e["ph"] == "X" and e["pid"] == 0 and e["tid"] == 0
              and e["name"] == "forward+backward"
              and first_step <= e["args"].get("step", -1) < first_step + steps + 1]
    if len(starts) < 2:
        ts = [e["ts"] for e in events if e["ph"] == "X"]
        return min(ts), max(ts)
    return min(starts), max(starts)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("png")
    p.add_argument("--first_step", type=int, default=10)
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args()
    with open(a.trace) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    names = {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "process_name":
            names[(e["pid"], None)] = e["args"]["name"]
        if e["ph"] == "M" and e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    lo, hi = window(events, a.first_step, a.steps)
    rows = sorted({(e["pid"], e["tid"]) for e in events if e["ph"] in "Xi"})
    row_of = {r: i for i, r in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(14, 0.55 * len(rows) + 1.6))
    for e in events:
        if e["ph"] not in "Xi" or not (lo <= e["ts"] <= hi):
            continue
        y = len(rows) - 1 - row_of[(e["pid"], e["tid"])]
        t = (e["ts"] - lo) / 1000.0
        key = base_name(e["name"])
        if e["ph"] == "i":
            ax.plot([t, t], [y - 0.45, y + 0.45], color="black", lw=0.8)
            continue
        # The per-step compute span encloses forward/backward: draw it thin.
        h = 0.25 if key == "forward+backward" else 0.8
        ax.broken_barh([(t, e["dur"] / 1000.0)], (y - h / 2, h),
                       facecolors=COLORS.get(key, "#607d8b"),
                       edgecolor="white", linewidth=0.3)
        if e["dur"] > (hi - lo) / 25 and key not in ("forward+backward",):
            ax.text(t + e["dur"] / 2000.0, y, e["name"], ha="center",
                    va="center", fontsize=6, clip_on=True)
    labels = ["%s / %s" % (names.get((pid, None), "rank %d" % pid),
                           names.get((pid, tid), "tid %d" % tid))
              for pid, tid in reversed(rows)]
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlim(0, (hi - lo) / 1000.0)
    ax.set_xlabel("ms (from step %d's forward on rank 0)" % a.first_step)
    ax.set_title("gradsync --trace: job %s, steps %d-%d" % (
        trace.get("otherData", {}).get("job_id", "?"), a.first_step,
        a.first_step + a.steps - 1))
    ax.legend(handles=[Patch(color=c, label=n) for n, c in COLORS.items()],
              loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=9,
              fontsize=7, frameon=False)
    fig.tight_layout()
    fig.savefig(a.png, dpi=130)


if __name__ == "__main__":
    main()
