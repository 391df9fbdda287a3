#!/usr/bin/env python3
"""Renders a merged gradsync trace (gradsync ... --trace) to a PNG timeline.

One row per (rank, thread), one coloured bar per complete event, a few steps
zoomed: the window starts at the training-thread span of --first_step on rank
0 and covers --steps steps. Instant events ("bucket ready") are drawn as ticks.

  python3 bench/experiments/trace_to_png.py trace.json docs/trace.png --first_step 20 --steps 3
"""
import argparse
import json
import sys

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
              and first_step <= (e.get("args") or {}).get("step", -1) < first_step + steps + 1]
    if len(starts) < 2:
        ts = [e["ts"] for e in events if e["ph"] == "X"]
        return min(ts), max(ts)
    return min(starts), max(starts)


def die(msg):
    print("trace_to_png: " + msg, file=sys.stderr)
    sys.exit(1)


# What each kind of event must carry to be drawn (Chrome trace format).
NEEDS = {"X": ("name", "pid", "tid", "ts", "dur"), "i": ("name", "pid", "tid", "ts"),
         "M": ("name", "pid", "args")}


def load_events(path):
    """The trace's events (the object form with traceEvents, or a bare list),
    each checked for what drawing it needs; exits 1 saying what is wrong."""
    try:
        with open(path) as f:
            trace = json.load(f)
    except OSError as e:
        die("cannot read %s: %s" % (path, e.strerror or e))
    except ValueError as e:
        die("%s is not valid JSON (%s)" % (path, e))
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    if not isinstance(events, list):
        die("%s is not a Chrome trace (no traceEvents list)" % path)
    for i, e in enumerate(events):
        if not isinstance(e, dict) or "ph" not in e:
            die("%s: event %d is not an event object with a ph" % (path, i))
        missing = [k for k in NEEDS.get(e["ph"], ()) if k not in e]
        if missing:
            die("%s: event %d (ph %s) lacks %s" % (path, i, e["ph"], ", ".join(missing)))
        bad = [k for k in ("ts", "dur") if k in NEEDS.get(e["ph"], ())
               and not isinstance(e[k], (int, float))]
        if bad:
            die("%s: event %d (ph %s): %s not a number" % (path, i, e["ph"], ", ".join(bad)))
        if e["ph"] == "M" and not isinstance(e["args"], dict):
            die("%s: event %d (ph M): args is not an object" % (path, i))
    if not any(e["ph"] == "X" for e in events):
        die("%s has no complete events (ph X) to draw; was the job run with --trace?" % path)
    return (trace if isinstance(trace, dict) else {}), events


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", help="a merged trace.json (gradsync ... --trace)")
    p.add_argument("png", help="the PNG to write")
    p.add_argument("--first_step", type=int, default=10,
                   help="the first step drawn (rank 0's forward starts the window)")
    p.add_argument("--steps", type=int, default=3, help="how many steps to draw (>= 1)")
    a = p.parse_args(argv)
    if a.steps < 1:
        p.error("--steps must be at least 1")
    trace, events = load_events(a.trace)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        die("drawing needs python3-matplotlib (Debian: apt-get install python3-matplotlib; "
            "use /usr/bin/python3 if another python3 comes first on PATH)")
    names = {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "process_name":
            names[(e["pid"], None)] = e["args"].get("name")
        if e["ph"] == "M" and e["name"] == "thread_name":
            names[(e["pid"], e.get("tid"))] = e["args"].get("name")
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
    try:
        fig.savefig(a.png, dpi=130)
    except OSError as e:
        die("cannot write %s: %s" % (a.png, e.strerror or e))


if __name__ == "__main__":
    main()
