#!/usr/bin/env python3
"""Checks bench/experiments/experiment.py's model fit and crossovers on synthetic data
(no network, no matplotlib): the least-squares fit must recover alpha and
beta from points made by the model itself, and must fail on data that is
off the model."""
import csv
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "experiment", os.path.join(ROOT, "bench", "experiments", "experiment.py"))
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

    def test_alpha_per_workers_brings_in_points_off_only_by_a_growing_alpha(self):
        # Every algorithm on the plain model, but with a time per message
        # that grows with N: the one fitted alpha misses the small points at
        # both ends, alpha fitted per N (a diagnostic) recovers each N's.
        beta, alpha_of = 117e6, {2: 60e-6, 4: 90e-6, 8: 150e-6}
        rows = [{"workers": n, "algorithm": alg, "bytes": k, "ok": True,
                 "job_alpha": None, "job_beta": None,
                 "time_seconds": experiment.model(alg, n, k, a, beta, flow=True)}
                for n, a in alpha_of.items() for k in (4096, 16384, 1 << 24, 1 << 26)
                for alg in ("ring", "hd", "tree")]
        link = {"shaper": "netem", "rate": "1gbit", "rate_from": "test",
                "rate_bytes_per_second": 125e6, "burst_bytes": 0,
                "burst_from": "test", "limit_bytes": None}
        per = experiment.analyse(rows, link)["alpha_per_workers"]
        for n, a in alpha_of.items():
            self.assertLess(abs(per["alpha_seconds"][str(n)] / a - 1), 0.05)
        self.assertEqual((per["within"], per["of"]), (len(rows), len(rows)))
        self.assertLess(per["one_alpha"], len(rows) - 4)

    def test_model_crossover_between_tree_and_ring(self):
        alpha, beta = 120e-6, 117e6
        c = experiment.crossovers(rows_from_model(alpha, beta), alpha, beta)
        k = c["N8 tree"]["model"]
        self.assertIsNotNone(k)
        # At the crossover the two model times meet.
        self.assertAlmostEqual(experiment.model("ring", 8, k, alpha, beta) /
                               experiment.model("tree", 8, k, alpha, beta), 1.0, places=3)
        # Measured from model points: the first listed size past it, and a
        # crossing interpolated between it and the size before, near the
        # model's.
        self.assertEqual(c["N8 tree"]["first_ring_win"], 1 << 20)
        self.assertTrue(1 << 16 < c["N8 tree"]["measured"] < 1 << 20)
        self.assertLess(abs(math.log2(c["N8 tree"]["measured"] / k)), 1.0)

    def test_pushpull_model_grows_with_workers_for_one_shard(self):
        # The shard shares a host with one worker, whose links carry (N-1) x K
        # each way; 16 partitions pipeline the pulls behind the pushes.
        t2 = experiment.model("ps1", 2, 1 << 26, 0, 125e6)
        t8 = experiment.model("ps1", 8, 1 << 26, 0, 125e6)
        self.assertAlmostEqual(t8 / t2, 7.0)
        self.assertAlmostEqual(t2, (1 << 26) / 125e6)
        # One partition (<= 4 MiB): the pull waits for every push.
        self.assertAlmostEqual(experiment.model("ps1", 4, 1 << 20, 0, 125e6),
                               2 * 3 * (1 << 20) / 125e6)

    def test_pushpull_model_follows_the_jobs_partition_size(self):
        # 3 MiB through one shard at N = 4: one 4 MiB partition makes the
        # pull wait for the pushes (2 x 3 x K); 1 MiB partitions overlap them
        # (3 x K), and a row that records its partition size gets that model.
        k, beta = 3 << 20, 125e6
        self.assertAlmostEqual(experiment.model("ps1", 4, k, 0, beta), 6 * k / beta)
        self.assertAlmostEqual(experiment.model("ps1", 4, k, 0, beta, partition=1 << 20),
                               3 * k / beta)
        row = {"algorithm": "ps1", "workers": 4, "bytes": k, "job_alpha": None,
               "job_beta": None, "ps_partition_bytes": 1 << 20}
        self.assertAlmostEqual(experiment.row_model(row, 0, beta), 3 * k / beta)
        row["ps_partition_bytes"] = None  # older results: the 4 MiB default
        self.assertAlmostEqual(experiment.row_model(row, 0, beta), 6 * k / beta)
        # The bucket model's rounds take it too: 3 partitions, pushes and
        # pulls in one round.
        self.assertEqual(len(experiment.pushpull_rounds(4, 1, k, 1 << 20)), 1)
        self.assertEqual(len(experiment.pushpull_rounds(4, 1, k)), 2)

    def test_pushpull_with_a_shard_per_host_moves_what_the_ring_moves(self):
        # N shards, partitions spread evenly: each host link carries the
        # ring's 2(N-1)/N x K. Uneven spreads (16 partitions on 3 shards) and
        # a single partition (all on shard 0) cost more.
        for n in (2, 4, 8):
            self.assertAlmostEqual(experiment.model("psN", n, 1 << 26, 0, 125e6),
                                   experiment.model("ring", n, 1 << 26, 0, 125e6))
        self.assertGreater(experiment.model("psN", 3, 1 << 26, 0, 125e6),
                           experiment.model("ring", 3, 1 << 26, 0, 125e6))
        self.assertAlmostEqual(experiment.model("psN", 4, 1 << 20, 0, 125e6),
                               experiment.model("ps1", 4, 1 << 20, 0, 125e6))

    def test_relative_fit_recovers_alpha_despite_large_points(self):
        # Off-model large points (10 % slow) must not swamp the small ones:
        # with the relative weighting, alpha stays within 10 %.
        alpha, beta = 80e-6, 117e6
        rows = rows_from_model(alpha, beta, ("ring",))
        for r in rows:
            if r["bytes"] >= 1 << 24:
                r["time_seconds"] *= 1.1
        a, _ = experiment.fit(rows)
        self.assertLess(abs(a / alpha - 1), 0.1)

    def test_hier_model_is_the_leaders_ring_plus_the_host_phases(self):
        alpha, beta, k = 50e-6, 117e6, 1 << 26
        local = (10e-6, 2e9)
        t = experiment.model("hier", 8, k, alpha, beta, per_host=2, local=local)
        # Each host phase: a chain of 2 ranks, 64 segments of 1 MiB.
        seg = 1 << 20
        intra = 2 * 64 * (local[0] + seg / local[1])
        self.assertAlmostEqual(t, intra + experiment.model("ring", 4, k, alpha, beta))
        # 4 per host, one segment: 3 hops each way.
        t = experiment.model("hier", 8, 4096, alpha, beta, per_host=4, local=local)
        intra = 2 * 3 * (local[0] + 4096 / local[1])
        self.assertAlmostEqual(t, intra + experiment.model("ring", 2, 4096, alpha, beta))

    def test_a_ring_over_shared_hosts_pays_local_latency_inside_a_host(self):
        alpha, beta, burst, rate = 160e-6, 114e6, 73728, 125e6
        local = (40e-6, 2.5e9)
        for n, per_host in ((4, 2), (6, 2), (8, 4)):
            hop = alpha / per_host + local[0] * (per_host - 1) / per_host
            # 4 KiB: every message fits the bucket, so only latency counts:
            # 2(N-1) hops at their mean latency.
            t = experiment.model("ring", n, 4096, alpha, beta, per_host=per_host, local=local,
                                 burst=burst, rate=rate, flow=True)
            self.assertAlmostEqual(t, 2 * (n - 1) * hop, delta=1e-9)
            # The bytes per link are one host's: at 64 MiB the latency hardly
            # matters and the time is the one-per-host ring's.
            big = [experiment.model("ring", n, 1 << 26, alpha, beta, per_host=ph, local=local,
                                    burst=burst, rate=rate, flow=True) for ph in (per_host, 1)]
            self.assertLess(abs(big[0] / big[1] - 1), 0.01)
            # One per host, the plain model, or no local ping-pong: unchanged.
            ring = experiment.model("ring", n, 4096, alpha, beta, burst=burst, rate=rate)
            # ... or ranks 0 and 1 on two hosts (their ping-pong no faster
            # than the link): the ranks are not host by host.
            for kw in ({"per_host": 1, "flow": True}, {"per_host": per_host, "flow": False},
                       {"per_host": per_host, "flow": True, "local": None},
                       {"per_host": per_host, "flow": True, "local": (alpha, 1.1 * beta)}):
                kw = dict({"local": local}, **kw)
                self.assertEqual(experiment.model("ring", n, 4096, alpha, beta, burst=burst,
                                                  rate=rate, **kw), ring)
            # The bench's host groups, where it has them, decide instead of
            # the ping-pong's speed: shared with a slow local link, or not
            # shared with a fast one.
            slow_local = (local[0], 1.1 * beta)
            t = experiment.model("ring", n, 4096, alpha, beta, per_host=per_host,
                                 local=slow_local, burst=burst, rate=rate, flow=True, shared=True)
            self.assertAlmostEqual(t, 2 * (n - 1) * hop, delta=1e-9)
            self.assertEqual(experiment.model("ring", n, 4096, alpha, beta, per_host=per_host,
                                              local=local, burst=burst, rate=rate, flow=True,
                                              shared=False), ring)

    def test_the_bench_host_groups_say_whether_ranks_0_and_1_shared_a_host(self):
        out = tempfile.mkdtemp(prefix="experiment-test.")
        try:
            row = {"algorithm": "ring", "bytes": 4096, "time_seconds": 1e-3, "busbw": 1.0,
                   "ok": True}
            inside = {"ranks": [0, 2], "alpha_seconds": 3e-5, "beta_bytes_per_second": 2e9}
            for name, groups in (("H2x2-ring.json", [0, 0, 1, 1]),
                                 ("H3x2-ring.json", [0, 1, 0, 1, 2, 2]),
                                 ("N2-ring.json", None)):
                d = {"rows": [row], "alpha_seconds": 1e-4, "beta_bytes_per_second": 1e8}
                if groups:
                    d["host_groups"] = groups
                    d["inside_host"] = inside if groups[1] == 1 else None
                with open(os.path.join(out, name), "w") as f:
                    json.dump(d, f)
            rows, _ = experiment.collect(out)
            by_n = {r["workers"]: r for r in rows}
            self.assertIs(by_n[4]["job_shared_host"], True)
            self.assertIs(by_n[6]["job_shared_host"], False)
            self.assertNotIn("job_shared_host", by_n[2])   # results from before the groups
            # The job's local link: its inside_host where it has one, else
            # ranks 0 and 1's (null inside_host: a JSON without one).
            self.assertEqual((by_n[6]["job_alpha"], by_n[6]["job_beta"]), (3e-5, 2e9))
            self.assertEqual((by_n[4]["job_alpha"], by_n[4]["job_beta"]), (1e-4, 1e8))
            self.assertEqual((by_n[2]["job_alpha"], by_n[2]["job_beta"]), (1e-4, 1e8))
        finally:
            shutil.rmtree(out)

    def test_crossover_agreement_counts_pairs_within_2x(self):
        def c(measured, model, first=1 << 16, same=False):
            return {"measured": measured, "model": model, "first_ring_win": first,
                    "same_messages": same}
        crossings = {
            "N2 hd": c(30e3, None, same=True),        # the ring's messages: not counted
            "N3 hd": c(18e3, 37e3),                   # 0.49x: outside
            "N3 tree": c(29e3, 36e3),                 # 0.8x
            "N4 hd": c(455e3, 55e3),                  # 8.3x: outside
            "N5 tree": c(39e3, 20e3),                 # 1.95x
            "N6 hd": c(None, 0.0, first=4096),        # both: ring faster at every size
            "N7 hd": c(None, None, first=None),       # both: never
            "N8 hd": c(None, 50e3, first=None),       # measured never, model a size
        }
        a = experiment.crossover_agreement(crossings)
        self.assertEqual((a["within"], a["of"]), (4, 7))
        self.assertEqual([k for k, _ in a["outside"]], ["N3 hd", "N4 hd", "N8 hd"])
        self.assertAlmostEqual(a["outside"][0][1], 18 / 37)
        self.assertIsNone(a["outside"][2][1])
        self.assertEqual(experiment.crossover_agreement(crossings, 10)["within"], 6)
        # Where the model ends in a tie, a pair outside counts in the second
        # view when the two came within TIE_SLACK of each other near the
        # model's crossover; the headline count stays.
        self.assertEqual(a["within_counting_ties"], 4)
        crossings["N4 hd"]["tie_over_model"] = 1.19
        crossings["N8 hd"]["tie_over_model"] = 2.5
        a = experiment.crossover_agreement(crossings)
        self.assertEqual((a["within"], a["within_counting_ties"], a["of"]), (4, 5, 7))

    def test_a_tied_crossover_is_where_the_two_come_within_the_slack(self):
        sizes = [1 << 12, 1 << 14, 1 << 16]
        ring = {1 << 12: 2.0, 1 << 14: 1.02, 1 << 16: 1.0}
        hd = {1 << 12: 1.0, 1 << 14: 1.0, 1 << 16: 1.01}
        self.assertEqual(experiment.measured_crossover(sizes, ring, hd)[0], 1 << 16)
        first, at = experiment.measured_crossover(sizes, ring, hd, experiment.TIE_SLACK)
        self.assertEqual(first, 1 << 14)
        self.assertTrue(1 << 12 < at < 1 << 14)
        # crossovers() adds it only where the model ends in a tie.
        alpha, beta = 120e-6, 117e6
        c = experiment.crossovers(rows_from_model(alpha, beta), alpha, beta,
                                  burst=73728, rate=125e6)
        self.assertIn("tie", [x["model_then"] for x in c.values()])
        self.assertTrue(all(("measured_tie" in x) == (x["model_then"] == "tie")
                            for x in c.values()))

    def test_measured_crossover_interpolates_between_sizes(self):
        sizes = [1 << 12, 1 << 14, 1 << 16]
        ring = {1 << 12: 2.0, 1 << 14: 2.0, 1 << 16: 1.0}
        tree = {1 << 12: 1.0, 1 << 14: 1.0, 1 << 16: 2.0}
        first, at = experiment.measured_crossover(sizes, ring, tree)
        self.assertEqual(first, 1 << 16)
        self.assertAlmostEqual(at, 1 << 15)  # log-midway: ratio 2 -> 1/2
        self.assertEqual(experiment.measured_crossover(sizes, tree, ring), (1 << 12, None))
        self.assertEqual(experiment.measured_crossover(sizes, tree, tree), (None, None))

    def test_unreadable_results_are_said_not_a_traceback(self):
        def plot(out):
            return subprocess.run(
                [sys.executable, os.path.join(ROOT, "bench", "experiments", "experiment.py"),
                 "plot", "--out=" + out], capture_output=True, text=True)
        out = tempfile.mkdtemp()
        try:
            cases = (("N2-ring.json", "{half", "is not valid JSON"),
                     ("N2-ring.json", "[1]", "is not a gradsync bench result"),
                     ("N2-ring.json", '{"rows": [{"bytes": 4096}]}',
                      "is not a gradsync bench result"),
                     ("experiment.json", "{}", "is not an experiment.py table"),
                     ("experiment.json", '{"rows": [{"workers": 2}]}',
                      "is not an experiment.py table"),
                     ("config.json", "[]", "is not a run's configuration"))
            for name, content, said in cases:
                for old in os.listdir(out):
                    os.remove(os.path.join(out, old))
                with open(os.path.join(out, name), "w") as f:
                    f.write(content)
                r = plot(out)
                self.assertEqual(r.returncode, 1, (name, content))
                self.assertIn(os.path.join(out, name) + " " + said, r.stderr, (name, content))
                self.assertNotIn("Traceback", r.stderr, (name, content))
            r = plot(os.path.join(out, "missing"))
            self.assertEqual(r.returncode, 1)
            self.assertIn("no directory", r.stderr)
            self.assertNotIn("Traceback", r.stderr)
        finally:
            shutil.rmtree(out)

    def test_split_sizes_and_result_names(self):
        self.assertEqual(experiment.split_sizes("4K,64K,1M,64M"), ("4K,64K", "1M,64M"))
        m = experiment.RESULT_NAME.fullmatch("H3x2-hier-small.json")
        self.assertEqual((m.group(2), m.group(3), m.group(4), m.group(5)),
                         ("3", "2", "hier", "-small"))
        m = experiment.RESULT_NAME.fullmatch("N4-psN.json")
        self.assertEqual((m.group(1), m.group(4), m.group(5)), ("4", "psN", None))
        m = experiment.RESULT_NAME.fullmatch("N4-ring-small-r3.json")
        self.assertEqual((m.group(1), m.group(4), m.group(5), m.group(6)),
                         ("4", "ring", "-small", "3"))

    def test_repeated_jobs_give_the_median_job_and_every_time(self):
        out = tempfile.mkdtemp(prefix="experiment-test.")
        try:
            times = {"": 2e-3, "-r2": 1e-3, "-r3": 4e-3}
            for suffix, t in times.items():
                rows = [{"algorithm": "ring", "bytes": 4096, "time_seconds": t,
                         "busbw": 1.0, "ok": suffix != "-r3"},
                        {"algorithm": "ring", "bytes": 16384, "time_seconds": 2 * t,
                         "busbw": 1.0, "ok": True}]
                with open(os.path.join(out, "N4-ring-small%s.json" % suffix), "w") as f:
                    json.dump({"rows": rows, "alpha_seconds": t, "beta_bytes_per_second": 1e8}, f)
            with open(os.path.join(out, "N4-ring.json"), "w") as f:
                json.dump({"rows": [{"algorithm": "ring", "bytes": 1 << 20, "time_seconds": 0.01,
                                     "busbw": 1.0, "ok": True}]}, f)
            rows, _ = experiment.collect(out)
            by_size = {r["bytes"]: r for r in rows}
            self.assertEqual(len(rows), 3)
            small = by_size[4096]
            self.assertEqual(small["time_seconds"], 2e-3)       # the median job
            self.assertEqual(small["job_alpha"], 2e-3)          # and its own fields
            self.assertEqual(small["repeat_seconds"], [1e-3, 2e-3, 4e-3])
            self.assertFalse(small["ok"])                       # one job's result was wrong
            self.assertTrue(by_size[16384]["ok"])
            self.assertEqual(by_size[16384]["time_seconds"], 4e-3)
            self.assertNotIn("repeat_seconds", by_size[1 << 20])
            # The tables keep every job's time (the CSV as t1;t2;t3).
            link = {"shaper": "tbf", "rate": "1gbit", "rate_from": "test",
                    "rate_bytes_per_second": 125e6, "burst_bytes": 0,
                    "burst_from": "test", "limit_bytes": None}
            experiment.write_tables(out, experiment.analyse(rows, link))
            with open(os.path.join(out, "experiment.csv")) as f:
                table = {int(r["bytes"]): r for r in csv.DictReader(f)}
            self.assertEqual(table[4096]["repeat_seconds"], "0.001;0.002;0.004")
            self.assertEqual(table[1 << 20]["repeat_seconds"], "")
            # Two jobs: the lower one; with the run's config asking for three,
            # the missing one is said.
            os.remove(os.path.join(out, "N4-ring-small-r3.json"))
            with open(os.path.join(out, experiment.CONFIG_NAME), "w") as f:
                json.dump({"repeats_small": 3}, f)
            rows, _ = experiment.collect(out)
            by_size = {r["bytes"]: r for r in rows}
            self.assertEqual(by_size[4096]["time_seconds"], 1e-3)
            self.assertEqual(by_size[4096]["jobs_missing"], 1)
            self.assertNotIn("jobs_missing", by_size[1 << 20])   # one job is all it gets
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_ps_reduce_threads_reach_the_shards_and_the_config(self):
        opts = {"rate": "1gbit", "shaper": "tbf", "burst": "", "limit": "",
                "build-dir": "build", "ps-reduce-threads": "8"}
        c = experiment.Cluster(opts, 3, 1)
        shutil.rmtree(c.state, ignore_errors=True)
        self.assertIn("--ps-reduce-threads=8", c.up)
        c = experiment.Cluster(dict(opts, **{"ps-reduce-threads": ""}), 3, 1)
        shutil.rmtree(c.state, ignore_errors=True)
        self.assertFalse([f for f in c.up if f.startswith("--ps-reduce-threads")])
        _, parsed = experiment.parse_args(["run", "--ps-reduce-threads=8"])
        self.assertEqual(experiment.run_config(parsed)["ps_reduce_threads"], 8)
        for bad in ("0", "65", "two"):
            script = os.path.join(ROOT, "bench", "experiments", "experiment.py")
            r = subprocess.run([sys.executable, script, "run", "--ps-reduce-threads=" + bad],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("--ps-reduce-threads takes 1..64", r.stderr, bad)

    def test_sweep_alternates_repeats_and_drops_an_earlier_runs_extra_ones(self):
        out = tempfile.mkdtemp(prefix="experiment-test.")
        try:
            for name in ("N4-ring-small-r5.json", "N4-ring-small.json", "N3-ring-small-r2.json"):
                open(os.path.join(out, name), "w").close()
            opts = {"rate": "1gbit", "shaper": "tbf", "burst": "", "limit": "",
                    "build-dir": "build", "sizes": "4K,1M", "repeats-small": 2,
                    "iters-small": 20, "iters": 3, "ps-partition-bytes": "",
                    "peer-bulk-bytes": "", "out": out}
            c = experiment.Cluster(opts, 5, 1)
            shutil.rmtree(c.state, ignore_errors=True)
            ran = []
            c.bench = lambda n, alg, sizes, iters, path, extra=(): ran.append(
                (alg, sizes, iters, os.path.basename(path)))
            c.sweep(opts, 4, ["ring", "tree"], "N4-%s")
            self.assertEqual(ran, [
                ("ring", "4K", 20, "N4-ring-small.json"), ("tree", "4K", 20, "N4-tree-small.json"),
                ("ring", "4K", 20, "N4-ring-small-r2.json"),
                ("tree", "4K", 20, "N4-tree-small-r2.json"),
                ("ring", "1M", 3, "N4-ring.json"), ("tree", "1M", 3, "N4-tree.json")])
            left = sorted(os.listdir(out))
            self.assertEqual(left, ["N3-ring-small-r2.json", "N4-ring-small.json"])
            self.assertIsNone(experiment.RESULT_NAME.fullmatch("N4-ring-r2.json"))
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
