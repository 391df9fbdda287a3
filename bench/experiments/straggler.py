#!/usr/bin/env python3
"""What one slow worker costs each strategy and mode (issue 52, item 2; the
baseline of issue 48's straggler work).

  python3 bench/experiments/straggler.py [--workers=4] [--epochs=1]
      [--slowdown=2] [--cpu_quota=Q] [--staleness=2] [--repeats=1]
      [--out=DIR] [--build-dir=build] [-- extra gradsync local flags]

Runs `gradsync local --compare` twice per repeat on the same machine, once
with every worker alike and once with the last worker --slowdown times
slower, and the same pair for ps async with an SSP bound (`--pairs=ps-async
--staleness=S`). How the worker is slowed:
  - default: its forward/backward takes --slowdown times as long
    (`--slow_worker`, the worker's --compute_slowdown). That is a sleep, so
    on a machine with fewer cores than workers the others get its CPU and a
    slow rank costs sync modes little;
  - --cpu_quota=Q (needs root and cgroup v1's cpu controller at
    /sys/fs/cgroup/cpu): every worker is held to Q CPUs by a CFS quota of its
    own, the slow one to Q / --slowdown (the way issue 52 measured it). The
    workers are started through a wrapper that joins its cgroup and execs
    the real worker, from a copy of the binaries' directory.
The baseline of each row is the same pair without the straggler, measured
in the same run. Prints, and writes to DIR/straggler.md and
DIR/straggler.json:

  pair | samples/s even | samples/s slow | kept (slow / even) |
  accuracy even | accuracy slow | steps per rank (slow)

The issue's target: ps-async keeps >= 0.85 of its even samples/s.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


CGROUP = "/sys/fs/cgroup/cpu"
WRAPPER = """#!/bin/sh
# Joins cgroup gsstrag-<id> (from --id=ID), then runs the real worker.
for a in "$@"; do case "$a" in --id=*) id="${a#--id=}";; esac; done
echo $$ > "%(cgroup)s/gsstrag-$id/cgroup.procs"
exec "%(real)s" "$@"
"""


def quota_bin_dir(build, workers, quota, slowdown, slow, work):
    """A bin dir whose gradsync-worker joins a CPU-quota cgroup per worker."""
    bin_dir = os.path.join(work, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    for name in ("gradsync", "gradsync-server"):
        dst = os.path.join(bin_dir, name)
        if not os.path.exists(dst):
            shutil.copy2(os.path.join(build, "bin", name), dst)
    wrapper = os.path.join(bin_dir, "gradsync-worker")
    with open(wrapper, "w") as f:
        f.write(WRAPPER % {"cgroup": CGROUP,
                           "real": os.path.join(os.path.abspath(build), "bin",
                                                "gradsync-worker")})
    os.chmod(wrapper, 0o755)
    period = 100000
    for w in range(workers):
        d = os.path.join(CGROUP, f"gsstrag-w{w}")
        os.makedirs(d, exist_ok=True)
        q = quota / slowdown if (slow and w == workers - 1) else quota
        with open(os.path.join(d, "cpu.cfs_period_us"), "w") as f:
            f.write(str(period))
        with open(os.path.join(d, "cpu.cfs_quota_us"), "w") as f:
            f.write(str(int(q * period)))
    return bin_dir


def remove_cgroups(workers):
    for w in range(workers):
        try:
            os.rmdir(os.path.join(CGROUP, f"gsstrag-w{w}"))
        except OSError:
            pass


def run_local(bin_dir, args, results):
    cmd = [os.path.join(bin_dir, "gradsync"), "local", "--compare",
           f"--results={results}"] + args
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(results) as f:
        return json.load(f)["jobs"]


def label(job):
    s = job["strategy"] + "-" + job["mode"]
    staleness = job.get("staleness")
    if job["strategy"] == "ps" and job["mode"] == "async" and staleness is not None \
            and staleness >= 0:
        s += f"(s={staleness})"
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--slowdown", type=float, default=2.0)
    ap.add_argument("--cpu_quota", type=float, default=0.0)
    ap.add_argument("--staleness", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default="")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("extra", nargs="*", help="further `gradsync local` flags")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="gradsync-straggler-")
    os.makedirs(out, exist_ok=True)
    base = [f"--workers={a.workers}", f"--epochs={a.epochs}"] + a.extra
    runs = {}  # (label, slow?) -> [job, ...]
    try:
        for r in range(a.repeats):
            for slow in (False, True):
                if a.cpu_quota > 0:
                    bin_dir = quota_bin_dir(a.build_dir, a.workers, a.cpu_quota,
                                            a.slowdown, slow, out)
                    flags = list(base)
                else:
                    bin_dir = os.path.join(a.build_dir, "bin")
                    flags = base + ([f"--slow_worker={a.slowdown}"] if slow else [])
                for extra in ([], ["--pairs=ps-async", f"--staleness={a.staleness}"]):
                    name = (f"r{r}-{'slow' if slow else 'even'}-"
                            f"{'ssp' if extra else 'all'}.json")
                    for job in run_local(bin_dir, flags + extra, os.path.join(out, name)):
                        if job["state"] != "SUCCEEDED":
                            sys.exit(f"{label(job)} did not succeed: {job.get('error')}")
                        runs.setdefault((label(job), slow), []).append(job)
    finally:
        if a.cpu_quota > 0:
            remove_cgroups(a.workers)
    rows = []
    for (name, slow), jobs in runs.items():
        if slow:
            continue
        even = jobs
        slowed = runs.get((name, True), [])
        if not slowed:
            continue
        sps_e = statistics.median(j["samples_per_second"] for j in even)
        sps_s = statistics.median(j["samples_per_second"] for j in slowed)
        rows.append({
            "pair": name,
            "samples_per_second_even": sps_e,
            "samples_per_second_slow": sps_s,
            "kept": sps_s / sps_e if sps_e > 0 else 0,
            "accuracy_even": statistics.median(j["test_accuracy"] for j in even),
            "accuracy_slow": statistics.median(j["test_accuracy"] for j in slowed),
            "steps_per_rank_slow": slowed[-1].get("steps_per_rank", []),
        })
    how = (f"each worker held to {a.cpu_quota} CPU, the last to "
           f"{a.cpu_quota / a.slowdown:.2f} (CFS quotas)" if a.cpu_quota > 0
           else "--slow_worker (a sleep after forward/backward)")
    lines = [f"{a.workers} workers, {a.epochs} epoch(s), last worker {a.slowdown}x slower: "
             f"{how}; median of {a.repeats}",
             "",
             "| pair | samples/s even | samples/s slow | kept | accuracy even | "
             "accuracy slow | steps per rank (slow) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['pair']} | {r['samples_per_second_even']:.0f} | "
            f"{r['samples_per_second_slow']:.0f} | {r['kept']:.2f} | "
            f"{r['accuracy_even']:.3f} | {r['accuracy_slow']:.3f} | "
            f"{' '.join(str(s) for s in r['steps_per_rank_slow'])} |")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, "straggler.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out, "straggler.json"), "w") as f:
        json.dump(rows, f, indent=2)
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
