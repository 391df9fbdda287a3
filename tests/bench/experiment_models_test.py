#!/usr/bin/env python3
"""Checks bench/experiments/experiment_models.py: its verdicts and crossover against the
alpha-beta model worked by hand, its tables and report from synthetic
results files, its refusals, and (with GRADSYNC_BUILD_DIR set and Debian's
python3-torch present) a small real run: one tiny model, 2 workers."""
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
SCRIPT = os.path.join(ROOT, "bench", "experiments", "experiment_models.py")
spec = importlib.util.spec_from_file_location("experiment_models", SCRIPT)
em = importlib.util.module_from_spec(spec)
spec.loader.exec_module(em)

ALPHA, BETA = 1e-4, 1e9


def bench(op, sizes_ms):
    return {"op": op, "alpha_seconds": ALPHA, "beta_bytes_per_second": BETA,
            "rows": [{"bytes": k, "time_seconds": ms / 1e3, "ok": True}
                     for k, ms in sizes_ms.items()]}


def job(strategy, sps, exposed, steps=100, batch=128):
    return {"strategy": strategy, "mode": "sync", "state": "SUCCEEDED",
            "samples_per_second": sps, "global_batch": batch, "steps": steps,
            "exposed_comm_seconds": exposed}


class VerdictTest(unittest.TestCase):
    def test_winner_has_a_tie_band(self):
        self.assertEqual(em.winner(100, 104), "tie")
        self.assertEqual(em.winner(100, 120), "ps")
        self.assertEqual(em.winner(120, 100), "ring")
        self.assertEqual(em.winner(None, 100), "?")

    def test_crossover_is_the_hand_worked_one(self):
        # N = 4, one shard on host 0: its link carries (N-1)K each way, so a
        # step's push and pull take 2(3K)/beta + 2 alpha; the ring takes
        # 2(N-1) alpha + 2(N-1)/N K/beta = 6 alpha + 1.5 K/beta. Equal at
        # K = 4 alpha / (4.5 / beta) = 88.9 KB.
        row = em.analyse("m", 4, 2500, job("ps", 12800, 0.5), job("ring", 12800, 0.5),
                         bench("allreduce", {}), bench("pushpull", {}))
        self.assertAlmostEqual(row["crossover_bytes"], 4 * ALPHA * BETA / 4.5, delta=100)
        # 10 KB is below it: PS's model step is shorter, by 4 alpha - 4.5 K/beta.
        self.assertLess(row["model_ps_ms"], row["model_ring_ms"])
        self.assertAlmostEqual(row["model_ring_ms"] - row["model_ps_ms"],
                               1e3 * (4 * ALPHA - 4.5 * 1e4 / BETA), places=6)
        # Compute: 128 samples at 12800/s is 10 ms a step, 5 ms of it waiting.
        self.assertAlmostEqual(row["compute_ms"], 5.0)
        # The what-if links use the same closed form: 1 Gbit (alpha 100 us,
        # beta 125 MB/s) puts the crossover at 4 * 1e-4 * 125e6 / 4.5 bytes.
        self.assertAlmostEqual(row["1gbit_crossover_bytes"], 4 * 1e-4 * 125e6 / 4.5,
                               delta=20)
        self.assertEqual(row["1gbit_winner"], "tie")  # 5.68 against 5.72 ms
        big = em.analyse("m", 4, 2500000, job("ps", 1000, 1.0), job("ring", 2000, 1.0),
                         bench("allreduce", {10000000: 20.0}),
                         bench("pushpull", {10000000: 70.0}))
        self.assertEqual(big["model_winner"], "ring")
        self.assertEqual(big["bench_winner"], "ring")
        self.assertEqual(big["train_winner"], "ring")
        self.assertTrue(big["agree"])
        self.assertEqual(big["bench_ring_ms"], 20.0)


class TablesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, name, data):
        with open(os.path.join(self.dir, name), "w") as f:
            json.dump(data, f)

    def test_report_and_tables_from_results_files(self):
        self.write("models-config.json", {"models": {
            "small": {"params": 1000, "data": "fashion-mnist"},
            "large": {"params": 1000000, "data": "fashion-mnist"}}})
        self.write("bench-ring-N4.json", bench("allreduce", {4000: 1.0, 4000000: 8.0}))
        self.write("bench-pushpull-N4.json", bench("pushpull", {4000: 0.5, 4000000: 30.0}))
        # small: training says ring though the model says PS (a disagreement
        # the report must name); large: both say ring.
        self.write("train-small-N4.json", {"jobs": [job("ps", 128000, 0.05),
                                                    job("ring", 256000, 0.05)]})
        self.write("train-large-N4.json", {"jobs": [job("ps", 2000, 5.0),
                                                    job("ring", 4000, 1.0)]})
        self.write("train-gone-N4.json", {"jobs": []})   # not in the config: ignored
        p = subprocess.run([sys.executable, SCRIPT, "plot", "--out=" + self.dir],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.dir, "models.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["model"] for r in rows], ["small", "large"])
        self.assertEqual(rows[0]["model_winner"], "ps")
        self.assertEqual(rows[0]["train_winner"], "ring")
        self.assertEqual(rows[0]["agree"], "False")
        self.assertEqual(rows[1]["train_winner"], "ring")
        self.assertIn("the model's verdict differs from training for: small N=4", p.stdout)
        self.assertIn("small (4 KB) below: PS side", p.stdout)
        # small's training difference (1.0 against 0.5 ms) is all compute.
        self.assertIn("small N=4: 100 % of the training's difference is compute", p.stdout)
        self.assertIn("large (4000 KB) above: ring side", p.stdout)

    def test_incomplete_results_are_left_out_and_said(self):
        self.write("models-config.json", {"models": {"m": {"params": 10, "data": "x"}}})
        self.write("train-m-N2.json", {"jobs": [job("ps", 100, 0.1)]})
        p = subprocess.run([sys.executable, SCRIPT, "plot", "--out=" + self.dir],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("m N=2 is incomplete", p.stderr)
        self.assertIn("no complete results", p.stderr)

    def test_bad_flags_are_refused(self):
        for args in (["run", "--models=vgg"], ["run", "--workers=1"],
                     ["run", "--epochs=0"], ["run", "--iters=x"], ["run", "--bogus=1"]):
            p = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True,
                               text=True)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn("experiment_models", p.stderr)


class RunTest(unittest.TestCase):
    """A real run: mlp-tiny on 2 workers, a few hundred samples."""

    def test_a_small_run_end_to_end(self):
        build = os.environ.get("GRADSYNC_BUILD_DIR")
        torch = subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                               capture_output=True).returncode == 0
        if not build or not torch:
            print("SKIPPED: experiment_models run: needs GRADSYNC_BUILD_DIR and "
                  "python3-torch (/usr/bin/python3)")
            self.skipTest("no build or no torch")
        out = tempfile.mkdtemp(prefix="gradsync-expmodels-")
        try:
            p = subprocess.run(
                [sys.executable, SCRIPT, "run", "--models=mlp-tiny", "--workers=2",
                 "--train-limit=640", "--iters=3", "--out=" + out,
                 "--build-dir=" + os.path.relpath(build, ROOT)],
                capture_output=True, text=True, timeout=280)
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
            with open(os.path.join(out, "models.json")) as f:
                rows = json.load(f)["rows"]
            self.assertEqual(len(rows), 1)
            r = rows[0]
            self.assertEqual(r["params"], 7850)
            self.assertGreater(r["alpha_seconds"], 0)
            for key in ("bench_ps_ms", "bench_ring_ms", "train_ps_ms", "train_ring_ms",
                        "compute_ms", "model_ps_ms", "model_ring_ms"):
                self.assertIsNotNone(r[key], key)
                self.assertGreater(r[key], 0, key)
            self.assertIn("mlp-tiny", p.stdout)
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
