#!/usr/bin/env python3
"""bench/experiments/experiment.py run end to end, small: 1 + 2 emulated hosts (ring and
ps1 at 4 KiB and 64 MiB, so a push/pull larger than one gRPC message goes
through one shard) and 1 + 2 hosts with 2 workers each (ring and hier), the
4 KiB points by two jobs each (--repeats-small=2); then every expected row
must be in experiment.json and verified OK, with both jobs' times where two
measured it, the run's
configuration (tbf, 72 KiB bucket) must be recorded and modelled, the fit must
be finite and the summary must count every point. Prints SKIPPED and passes
where the emulated cluster cannot run (not root, no network namespaces)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("GRADSYNC_BUILD_DIR", os.path.join(ROOT, "build"))


def main():
    if os.geteuid() != 0:
        print("experiment_run_test: SKIPPED: not root (network namespaces)")
        return 0
    if not os.access(os.path.join(BUILD, "bin", "gradsync"), os.X_OK):
        print("experiment_run_test: FAIL: no %s/bin/gradsync" % BUILD)
        return 1
    out = tempfile.mkdtemp(prefix="experiment-run-test.")
    try:
        script = os.path.join(ROOT, "bench", "experiments", "experiment.py")
        rc = subprocess.run([sys.executable, script, "run",
                             "--workers=2", "--sizes=4K,64M", "--algorithms=ring,ps1",
                             "--hier-hosts=2", "--iters=1", "--iters-small=2",
                             "--repeats-small=2",
                             "--build-dir=" + BUILD, "--out=" + out]).returncode
        if rc == 3:
            print("experiment_run_test: SKIPPED: the emulated cluster cannot run here")
            return 0
        if rc != 0:
            print("experiment_run_test: FAIL: experiment.py run exited %d" % rc)
            return 1
        with open(os.path.join(out, "experiment.json")) as f:
            d = json.load(f)
        got = {(r["workers"], r["per_host"], r["algorithm"], r["bytes"]): r["ok"]
               for r in d["rows"]}
        want = [(2, 1, a, k) for a in ("ring", "ps1") for k in (4096, 64 << 20)]
        want += [(4, 2, a, k) for a in ("ring", "hier") for k in (4096, 64 << 20)]
        bad = [w for w in want if got.get(w) is not True]
        if bad:
            print("experiment_run_test: FAIL: rows missing or not OK: %s" % bad)
            return 1
        repeats = {(r["workers"], r["algorithm"], r["bytes"]): len(r.get("repeat_seconds", []))
                   for r in d["rows"]}
        wrong = {k: v for k, v in repeats.items() if v != (2 if k[2] == 4096 else 0)}
        if wrong:
            print("experiment_run_test: FAIL: jobs per point (want 2 at 4 KiB, one "
                  "above): %s" % wrong)
            return 1
        if not (0 <= d["alpha_seconds"] < 1 and 1e6 < d["beta_bytes_per_second"] < 1e12):
            print("experiment_run_test: FAIL: fit out of range: %s %s" % (
                d["alpha_seconds"], d["beta_bytes_per_second"]))
            return 1
        cfg = d.get("config") or {}
        if (cfg.get("shaper"), cfg.get("burst"), cfg.get("workers"), cfg.get("iters"),
                cfg.get("repeats_small")) != ("tbf", 73728, [2], 1, 2) or \
                not str(cfg.get("date", "")).startswith("20") or \
                d.get("model") != "alpha-beta+bucket":
            print("experiment_run_test: FAIL: config %s, model %s: want the run's tbf "
                  "bucket recorded and modelled" % (cfg, d.get("model")))
            return 1
        if d["within_tolerance"]["of"] != len(want):
            print("experiment_run_test: FAIL: summary counts %d points, want %d" % (
                d["within_tolerance"]["of"], len(want)))
            return 1
        print("experiment_run_test: PASSED (%d rows; fit alpha %.0f us, beta %.0f MB/s)" % (
            len(want), d["alpha_seconds"] * 1e6, d["beta_bytes_per_second"] / 1e6))
        return 0
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
