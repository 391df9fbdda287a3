"""The run directory: the bench jobs' results (and config.json) read into
rows, or a directory of tables (experiment.json) read back; an earlier
run's points merged in (--base); the tables written (experiment.csv,
experiment.json)."""

import csv
import json
import os
import re

from .common import SMALL, die, read_json

CONFIG_NAME = "config.json"   # run's configuration, next to its results
RESULT_NAME = re.compile(r"(?:N(\d+)|H(\d+)x(\d+))-(\w+?)(?:(-small)(?:-r(\d+))?)?\.json")
DERIVED = ("model_seconds", "measured_over_model", "plain_model_seconds",
           "plain_measured_over_model", "note")   # what write_tables adds to a row
TABLE_KEYS = ("workers", "per_host", "algorithm", "bytes", "time_seconds", "ok")
LINK_KEYS = ("shaper", "rate", "burst", "limit")   # run_config's: how the links were shaped


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


def rate_bytes(text):
    """tc's rate syntax (1gbit, 100mbit, 10mbps, 1gibit; a bare number is
    bit/s) in bytes per second; None if it is not one."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgt]?)(i?)(bit|bps)?", str(text).strip().lower())
    if not m or (m.group(3) and not m.group(2)):
        return None
    value = float(m.group(1)) * (1024 if m.group(3) else 1000) ** " kmgt".index(m.group(2) or " ")
    return value if m.group(4) == "bps" else value / 8


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
