"""The text report of an analysed run, as `run` and `plot` print it, and the
lines that say which run measured which points."""

from experiment_model import BANDWIDTH_FROM, LATENCY_UPTO, ring_rows

from .analysis import NOISY, PLAIN, STALL, TIE_SLACK
from .results import run_label


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


def human(k):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if k >= 1 << shift and k % (1 << shift) == 0:
            return "%d %s" % (k >> shift, unit)
    return "%d B" % k


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
