#!/usr/bin/env python3
"""Checks bench/experiment.py's model fit and crossovers on synthetic data
(no network, no matplotlib): the least-squares fit must recover alpha and
beta from points made by the model itself, and must fail on data that is
off the model."""
import importlib.util
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "experiment", os.path.join(ROOT, "bench", "experiment.py"))
experiment = importlib.util.module_from_spec(spec)
spec.loader.exec_module(experiment)


def rows_from_model(alpha, beta, algorithms=("ring", "hd", "tree")):
    rows = []
    for n in (2, 3, 4, 8):
        for k in (4096, 1 << 16, 1 << 20, 1 << 24):
            for alg in algorithms:
                rows.append({"workers": n, "algorithm": alg, "bytes": k, "ok": True,
                             "time_seconds": experiment.model(alg, n, k, alpha, beta)})
    return rows


class FitTest(unittest.TestCase):
    def test_recovers_alpha_and_beta_from_model_points(self):
        alpha, beta = 120e-6, 117e6
        a, b = experiment.fit(rows_from_model(alpha, beta))
        self.assertAlmostEqual(a / alpha, 1.0, places=6)
        self.assertAlmostEqual(b / beta, 1.0, places=6)

    def test_points_off_the_model_give_another_fit(self):
        rows = rows_from_model(120e-6, 117e6)
        for r in rows:
            if r["algorithm"] == "ring" and r["bytes"] == 1 << 24:
                r["time_seconds"] *= 2  # a slow link at large sizes
        a, b = experiment.fit(rows)
        self.assertLess(b, 0.9 * 117e6)

    def test_model_crossover_between_tree_and_ring(self):
        alpha, beta = 120e-6, 117e6
        c = experiment.crossovers(rows_from_model(alpha, beta), alpha, beta)
        k = c["N8 tree"]["model"]
        self.assertIsNotNone(k)
        # At the crossover the two model times meet.
        self.assertAlmostEqual(experiment.model("ring", 8, k, alpha, beta) /
                               experiment.model("tree", 8, k, alpha, beta), 1.0, places=3)
        # Measured from model points: the first listed size past it.
        self.assertEqual(c["N8 tree"]["measured"], 1 << 20)

    def test_pushpull_model_grows_with_workers_for_one_shard(self):
        t2 = experiment.model("ps1", 2, 1 << 26, 0, 125e6)
        t8 = experiment.model("ps1", 8, 1 << 26, 0, 125e6)
        self.assertAlmostEqual(t8 / t2, 4.0)


if __name__ == "__main__":
    unittest.main()
