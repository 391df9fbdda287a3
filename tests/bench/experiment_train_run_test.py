#!/usr/bin/env python3
"""bench/experiments/experiment_train.py run --network=emulated end to end, small: 1 + 2
emulated hosts, ps-sync and allreduce-sync on 2000 training samples; both jobs
must succeed, with a timeline (loss and test accuracy on the wall clock),
and the run's network must be recorded. Prints SKIPPED and passes where the
emulated cluster cannot run (not root, no network namespaces)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("GRADSYNC_BUILD_DIR", os.path.join(ROOT, "build"))
DATA = "/usr/share/datasets/fashion-mnist"   # the workers' default


def fail(msg):
    print("experiment_train_run_test: FAIL: " + msg)
    return 1


def main():
    if os.geteuid() != 0:
        print("experiment_train_run_test: SKIPPED: not root (network namespaces)")
        return 0
    if not os.path.isdir(DATA):
        print("experiment_train_run_test: SKIPPED: no Fashion-MNIST at %s "
              "(apt-get install dataset-fashion-mnist)" % DATA)
        return 0
    out = tempfile.mkdtemp(prefix="experiment-train-run-test.")
    try:
        script = os.path.join(ROOT, "bench", "experiments", "experiment_train.py")
        rc = subprocess.run([sys.executable, script,
                             "run", "--network=emulated", "--workers=2", "--epochs=1",
                             "--train-limit=2000", "--pairs=ps-sync,allreduce-sync", "--curves=2",
                             "--build-dir=" + BUILD, "--out=" + out]).returncode
        if rc == 3:
            print("experiment_train_run_test: SKIPPED: the emulated cluster cannot run here")
            return 0
        if rc != 0:
            return fail("experiment_train.py run exited %d" % rc)
        with open(os.path.join(out, "train.json")) as f:
            d = json.load(f)
        if (d["network"].get("network"), d["network"].get("rate")) != ("emulated", "1gbit"):
            return fail("network %s: want the emulated 1gbit network recorded" % d["network"])
        states = {(r["workers"], r["mode"]): r.get("state") for r in d["rows"]}
        want = {(2, "ps-sync"): "SUCCEEDED", (2, "allreduce-sync"): "SUCCEEDED"}
        if states != want:
            return fail("rows %s, want %s" % (states, want))
        for mode in ("ps-sync", "allreduce-sync"):
            tl = d["curves"].get(mode) or {}
            if not tl.get("progress") or not tl.get("epochs"):
                return fail("%s has no timeline (progress and epochs): %s" % (mode, tl))
        print("experiment_train_run_test: PASSED (%s)" % ", ".join(
            "%s %.0f samples/s" % (r["mode"], r["samples_per_second"]) for r in d["rows"]))
        return 0
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
