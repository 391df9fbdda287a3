#!/usr/bin/env python3
"""Checks bench/experiments/experiment_train.py's collection and tables on synthetic
results files (no cluster, no matplotlib): rows per (N, mode) in mode order,
the --curves run's timelines kept, failed jobs marked, a missing directory
and bad flags refused, the run's network recorded and named."""
import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "experiments", "experiment_train.py")
spec = importlib.util.spec_from_file_location(
    "experiment_train", SCRIPT)
et = importlib.util.module_from_spec(spec)
spec.loader.exec_module(et)


def job(strategy, mode, sps, state="SUCCEEDED"):
    return {"strategy": strategy, "mode": mode, "state": state,
            "samples_per_second": sps, "wall_seconds": 60000.0 / max(sps, 1),
            "test_accuracy": 0.84, "final_train_loss": 0.4, "comm_seconds": 1.0,
            "exposed_comm_seconds": 0.5, "per_epoch": [{"epoch": 1}],
            "timeline": {"progress": [{"t": 0.5, "step": 10, "epoch": 1, "loss": 1.0,
                                       "samples_per_second": sps}],
                         "epochs": [{"t": 2.0, "epoch": 1, "train_loss": 0.9,
                                     "test_accuracy": 0.8}]}}


class TrainTablesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, n, jobs, network=None):
        with open(os.path.join(self.dir, "train-N%d.json" % n), "w") as f:
            json.dump(dict({"jobs": jobs}, **({"network": network} if network else {})), f)

    def test_rows_curves_and_failures(self):
        # Written out of mode order: the rows come back in MODES order.
        self.write(1, [job("ring", "sync", 900), job("ps", "sync", 1000)])
        self.write(4, [job("ring", "async", 3000), job("ps", "async", 0, "FAILED"),
                       job("ps", "sync", 2000), job("ring", "sync", 2500)])
        rows, jobs, network = et.collect(self.dir)
        self.assertEqual(network, {"network": "loopback"})   # files from before it was kept
        self.assertEqual([(r["workers"], r["mode"]) for r in rows],
                         [(1, "ps-sync"), (1, "allreduce-sync"), (4, "ps-sync"),
                          (4, "ps-async"), (4, "allreduce-sync"), (4, "allreduce-async")])
        self.assertEqual(rows[3]["state"], "FAILED")
        et.write_tables(self.dir, rows, jobs, 4, network)
        with open(os.path.join(self.dir, "train.csv")) as f:
            table = list(csv.DictReader(f))
        self.assertEqual(len(table), 6)
        self.assertEqual(float(table[5]["samples_per_second"]), 3000)
        with open(os.path.join(self.dir, "train.json")) as f:
            summary = json.load(f)
        self.assertEqual(sorted(summary["curves"]),
                         ["allreduce-async", "allreduce-sync", "ps-async", "ps-sync"])
        self.assertEqual(summary["curves"]["allreduce-async"]["epochs"][0]["test_accuracy"], 0.8)

    def test_no_results_is_an_error(self):
        r = subprocess.run([sys.executable, SCRIPT,
                            "plot", "--out=" + self.dir], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no train-N", r.stderr)

    def test_unreadable_results_are_said_not_a_traceback(self):
        def plot(out):
            return subprocess.run(
                [sys.executable, SCRIPT,
                 "plot", "--out=" + out], capture_output=True, text=True)
        path = os.path.join(self.dir, "train-N2.json")
        for content, said in (("{not json", "is not valid JSON"),
                              ("[1, 2]", "is not a train-N results file"),
                              ('{"jobs": [5]}', "is not a train-N results file")):
            with open(path, "w") as f:
                f.write(content)
            r = plot(self.dir)
            self.assertEqual(r.returncode, 1, content)
            self.assertIn(path + " " + said, r.stderr, content)
            self.assertNotIn("Traceback", r.stderr, content)
        r = plot(os.path.join(self.dir, "missing"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("no directory", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_bad_flag_is_refused(self):
        for bad in ("--workers=0", "--network=wan", "--pairs=allreduce-sync,ps-bsp", "--limit=8M"):
            r = subprocess.run([sys.executable,
                                SCRIPT, "run", bad],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("experiment_train:", r.stderr, bad)

    def test_the_network_is_recorded_named_and_never_mixed(self):
        _, opts = et.parse_args(["run", "--network=emulated", "--rate=100mbit"])
        emulated = et.network_config(opts)
        self.assertEqual((emulated["network"], emulated["rate"], emulated["burst"],
                          emulated["limit"]), ("emulated", "100mbit", 73728, 8388608))
        self.assertIn("100mbit", et.network_text(emulated))
        self.assertEqual(et.network_text({"network": "loopback"}), "loopback, one machine")
        self.write(2, [job("ring", "sync", 900)], emulated)
        self.write(4, [job("ring", "sync", 1900)], emulated)
        rows, jobs, network = et.collect(self.dir)
        self.assertEqual(network, emulated)
        et.write_tables(self.dir, rows, jobs, 2, network)
        with open(os.path.join(self.dir, "train.json")) as f:
            self.assertEqual(json.load(f)["network"], emulated)
        # A loopback result beside them (no network recorded: an old one).
        self.write(1, [job("ring", "sync", 500)])
        r = subprocess.run([sys.executable, SCRIPT,
                            "plot", "--out=" + self.dir], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("different networks", r.stderr)

    def test_a_job_without_results_stays_in_the_table(self):
        self.write(2, [job("ring", "sync", 900),
                       {"strategy": "ps", "mode": "sync", "state": "NO_RESULTS",
                        "error": "gradsync submit exited 1"}])
        rows, _, _ = et.collect(self.dir)
        self.assertEqual([(r["mode"], r.get("state")) for r in rows],
                         [("ps-sync", "NO_RESULTS"), ("allreduce-sync", "SUCCEEDED")])


if __name__ == "__main__":
    unittest.main()
