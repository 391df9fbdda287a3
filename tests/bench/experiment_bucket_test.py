#!/usr/bin/env python3
"""Checks bench/experiments/experiment.py's token-bucket model of the emulated link
(tbf) on synthetic data (no network, no root, no matplotlib): without a
bucket it is the plain alpha-beta model; a message that fits a refilled
bucket costs alpha alone; a long transfer takes K/beta less at most one
bucket; the fit recovers alpha and beta from points the model made; the
rounds are the collectives' messages; the bucket comes from the run's
configuration, --burst, or run's default, and netem means no bucket."""
import contextlib
import importlib.util
import io
import json
import os
import shutil
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "experiment", os.path.join(ROOT, "bench", "experiments", "experiment.py"))
experiment = importlib.util.module_from_spec(spec)
spec.loader.exec_module(experiment)

ALPHA, BETA, RATE, BURST = 100e-6, 118e6, 125e6, 73728
ALGS = ("ring", "hd", "tree", "ps1", "psN")


def rows_from_model(alpha, beta, burst, rate, algorithms=("ring", "hd", "tree"), flow=False):
    """Rows at the model's times; flow: tree's message-level model, as
    analyse() uses it (flow_model.py), instead of its rounds."""
    rows = []
    for n in (2, 3, 4, 8):
        for k in (4096, 1 << 14, 1 << 16, 1 << 20, 1 << 24):
            for alg in algorithms:
                rows.append({"workers": n, "per_host": 1, "algorithm": alg, "bytes": k,
                             "ok": True, "job_alpha": None, "job_beta": None,
                             "time_seconds": experiment.model(alg, n, k, alpha, beta,
                                                              burst=burst, rate=rate,
                                                              flow=flow)})
    return rows


class LinkTest(unittest.TestCase):
    def test_without_a_bucket_a_message_takes_m_over_beta(self):
        link = experiment.Link(BETA, 0)
        self.assertAlmostEqual(link.send(1.0, 1e6), 1.0 + 1e6 / BETA)
        # FIFO: the next one waits for the link.
        self.assertAlmostEqual(link.send(1.0, 1e6), 1.0 + 2e6 / BETA)

    def test_a_message_that_fits_the_refilled_bucket_leaves_at_once(self):
        link = experiment.Link(BETA, BURST)
        self.assertEqual(link.send(0.0, 60000), 0.0)
        # 13728 tokens left: 20000 bytes wait for 6272 more.
        self.assertAlmostEqual(link.send(0.0, 20000), 6272 / BETA)
        # After a long idle the bucket is full again, not fuller.
        t = 10.0
        self.assertEqual(link.send(t, BURST), t)
        self.assertAlmostEqual(link.send(t, 1000), t + 1000 / BETA)

    def test_a_long_transfer_takes_k_over_beta_less_one_bucket(self):
        link = experiment.Link(BETA, BURST)
        k = 1 << 30
        self.assertAlmostEqual(link.send(5.0, k), 5.0 + (k - BURST) / BETA)

    def test_payload_burst_counts_headers(self):
        self.assertAlmostEqual(experiment.payload_burst(BURST, RATE, BETA), BURST * BETA / RATE)
        self.assertEqual(experiment.payload_burst(BURST, None, BETA), BURST)
        self.assertEqual(experiment.payload_burst(BURST, RATE, 2 * RATE), BURST)


class ModelTest(unittest.TestCase):
    def test_zero_burst_is_plain_alpha_beta(self):
        # The round-by-round simulation without a bucket is the closed form
        # (cost_model.h's formulas and the push/pull busiest link).
        for alg in ALGS:
            for n in range(2, 9):
                for k in (4096, 1 << 16, 1 << 22, (1 << 22) + 4, 1 << 26):
                    rounds = (experiment.pushpull_rounds(n, 1 if alg == "ps1" else n, k)
                              if alg in ("ps1", "psN") else
                              [(1, r) for r in experiment.schedule(alg, n, k)])
                    plain = experiment.model(alg, n, k, ALPHA, BETA)
                    self.assertAlmostEqual(
                        experiment.shaped_seconds(n, rounds, ALPHA, BETA, 0) / plain, 1.0,
                        places=12, msg="%s N=%d K=%d" % (alg, n, k))
                    self.assertEqual(experiment.model(alg, n, k, ALPHA, BETA, burst=0,
                                                      rate=RATE), plain)

    def test_small_messages_cost_alpha_alone(self):
        # Each ring step's K/N bytes fit what the bucket regains while the
        # previous step waits alpha: 2(N-1) x alpha, no bandwidth term.
        for n in (2, 4, 8):
            self.assertAlmostEqual(
                experiment.model("ring", n, 4096, ALPHA, BETA, burst=BURST, rate=RATE),
                2 * (n - 1) * ALPHA)
        self.assertAlmostEqual(
            experiment.model("tree", 8, 16384, ALPHA, BETA, burst=BURST, rate=RATE), 3 * ALPHA)
        # Without the bucket the same points pay K/beta per message.
        self.assertGreater(experiment.model("tree", 8, 16384, ALPHA, BETA),
                           3 * ALPHA + 3 * 16384 / BETA * 0.99)

    def test_large_sizes_approach_the_plain_model(self):
        k = 1 << 30
        for alg in ALGS:
            for n in (2, 5, 8):
                plain = experiment.model(alg, n, k, ALPHA, BETA)
                bucket = experiment.model(alg, n, k, ALPHA, BETA, burst=BURST, rate=RATE)
                self.assertLessEqual(bucket, plain * (1 + 1e-12))
                self.assertLess(1 - bucket / plain, 1e-3, "%s N=%d" % (alg, n))

    def test_a_bucket_never_slows_a_link(self):
        for alg in ALGS:
            for n in (2, 3, 6, 8):
                for k in (4096, 1 << 16, 1 << 18, 1 << 20, 1 << 24):
                    self.assertLessEqual(
                        experiment.model(alg, n, k, ALPHA, BETA, burst=BURST, rate=RATE),
                        experiment.model(alg, n, k, ALPHA, BETA) * (1 + 1e-12))

    def test_rounds_are_the_collectives_messages(self):
        k = 1 << 20
        for n in range(2, 9):
            p = 1 << (n.bit_length() - 1)
            levels, fold = p.bit_length() - 1, 2 * (n != p)
            ring = experiment.schedule("ring", n, k)
            self.assertEqual(len(ring), 2 * (n - 1))
            sent = sum(m for rnd in ring for s, _, m in rnd if s == 0)
            self.assertAlmostEqual(sent, 2 * (n - 1) / n * k)
            self.assertEqual(len(experiment.schedule("hd", n, k)), 2 * levels + fold)
            self.assertEqual(len(experiment.schedule("tree", n, k)), levels + fold)
            if n == p:  # every rank sends what the ring sends, in fewer messages
                hd = experiment.schedule("hd", n, k)
                for rank in range(n):
                    self.assertAlmostEqual(
                        sum(m for rnd in hd for s, _, m in rnd if s == rank), sent)
        # At N = 2 halving-doubling is the ring, message for message.
        self.assertEqual(experiment.schedule("hd", 2, k), experiment.schedule("ring", 2, k))


class FitTest(unittest.TestCase):
    def test_fit_recovers_alpha_and_beta_from_bucket_points(self):
        for alpha, beta in ((100e-6, 118e6), (40e-6, 60e6)):
            rows = rows_from_model(alpha, beta, BURST, RATE)
            a, b = experiment.fit(rows, BURST, RATE)
            self.assertAlmostEqual(a / alpha, 1.0, places=5)
            self.assertAlmostEqual(b / beta, 1.0, places=5)

    def test_the_plain_fit_is_biased_by_the_bucket(self):
        # The same points fitted without the bucket: alpha comes out low (the
        # 16 KiB points cost less than alpha + K/beta per message).
        rows = rows_from_model(100e-6, 118e6, BURST, RATE)
        a, _ = experiment.fit(rows)
        self.assertLess(a, 0.9 * 100e-6)


class CrossoverTest(unittest.TestCase):
    def test_hd_stops_beating_the_ring_only_with_the_bucket(self):
        rows = rows_from_model(ALPHA, BETA, BURST, RATE)
        c = experiment.crossovers(rows, ALPHA, BETA, BURST, RATE, (ALPHA, BETA))
        # Plain alpha-beta: the same bytes and fewer alphas, hd always wins.
        self.assertIsNone(c["N8 hd"]["model_plain"])
        # With the bucket the alphas are hidden once the messages outgrow
        # what it regains in one alpha: then the two take the same time.
        k = c["N8 hd"]["model"]
        self.assertTrue(1 << 14 < k < 1 << 20)
        self.assertEqual(c["N8 hd"]["model_then"], "tie")

        def m(alg, size):
            return experiment.model(alg, 8, size, ALPHA, BETA, burst=BURST, rate=RATE)
        self.assertLess(m("hd", k / 2), m("ring", k / 2))
        self.assertAlmostEqual(m("hd", 4 * k) / m("ring", 4 * k), 1.0, places=9)
        # Points made by the model cross where the model does, within the
        # sizes' spacing (4x); tree sends more than the ring, so the ring
        # wins outright past it.
        self.assertEqual(c["N8 tree"]["model_then"], "ring")
        self.assertLess(abs(c["N8 tree"]["measured_over_model"] - 1), 3.0)
        self.assertLess(c["N8 tree"]["model"], c["N8 tree"]["first_ring_win"])
        # hd at N = 2 sends the ring's messages: no model crossover.
        self.assertTrue(c["N2 hd"]["same_messages"])
        self.assertIsNone(c["N2 hd"]["model"])

    def test_model_crossover_orders(self):
        mc = experiment.model_crossover
        self.assertEqual(mc(lambda k: 2.0, lambda k: 1.0), (0.0, "ring"))
        self.assertEqual(mc(lambda k: 1.0, lambda k: 1.0), (None, None))
        k, then = mc(lambda k: k, lambda k: 1e4)   # other faster, then ring
        self.assertAlmostEqual(k / 1e4, 1.0, places=6)
        self.assertEqual(then, "ring")
        k, then = mc(lambda k: min(k, 1e4), lambda k: 1e4)  # other faster, then a tie
        self.assertAlmostEqual(k / 1e4, 1.0, places=6)
        self.assertEqual(then, "tie")
        k, then = mc(lambda k: max(k, 1e4), lambda k: 1e4)  # tie, then ring faster
        self.assertAlmostEqual(k / 1e4, 1.0, places=6)
        self.assertEqual(then, "ring")


class ShapingTest(unittest.TestCase):
    def test_rate_syntax(self):
        self.assertEqual(experiment.rate_bytes("1gbit"), 125e6)
        self.assertEqual(experiment.rate_bytes("100mbit"), 12.5e6)
        self.assertEqual(experiment.rate_bytes("10mbps"), 10e6)
        self.assertEqual(experiment.rate_bytes("1kibit"), 128)
        self.assertIsNone(experiment.rate_bytes("fast"))

    def test_where_the_bucket_comes_from(self):
        s = experiment.shaping
        self.assertEqual(s(None, None)["burst_bytes"], 73728)
        self.assertIn("default", s(None, None)["burst_from"])
        self.assertEqual(s(None, None)["limit_bytes"], 73728 + 625000)
        cfg = {"shaper": "tbf", "rate": "100mbit", "burst": 16384, "limit": 8388608}
        link = s(None, cfg)
        self.assertEqual((link["burst_bytes"], link["limit_bytes"]), (16384, 8388608))
        self.assertEqual(link["rate_bytes_per_second"], 12.5e6)
        self.assertEqual(s("4096", cfg)["burst_bytes"], 4096)
        self.assertEqual(s(None, dict(cfg, shaper="netem", burst=None))["burst_bytes"], 0)
        self.assertEqual(s(None, dict(cfg, burst=None))["burst_bytes"], 73728)

    def test_netem_runs_get_the_plain_model(self):
        rows = rows_from_model(ALPHA, BETA, 0, None, flow=True)
        link = experiment.shaping(None, {"shaper": "netem", "rate": "1gbit", "burst": None})
        summary = experiment.analyse(rows, link, {"shaper": "netem"})
        self.assertEqual(summary["model"], "alpha-beta")
        self.assertEqual(list(summary["models"]), ["alpha-beta"])
        for r in rows:
            # No bucket; tree's messages as sent (flow_model.py), the rest
            # exactly cost_model.h's formulas.
            if r["algorithm"] != "tree":
                self.assertEqual(r["model_seconds"], r["plain_model_seconds"])
            self.assertAlmostEqual(r["measured_over_model"], 1.0, places=6)
        fold = [r for r in rows if r["algorithm"] == "tree" and r["workers"] == 3
                and r["bytes"] == 1 << 20][0]
        self.assertGreater(fold["model_seconds"], fold["plain_model_seconds"] * 1.2)
        self.assertEqual(summary["within_tolerance"]["within"], len(rows))

    def test_tables_keep_the_config_and_notes(self):
        rows = rows_from_model(ALPHA, BETA, BURST, RATE, ALGS, flow=True)
        for r in rows:
            if r["algorithm"] == "ps1" and r["workers"] == 8 and r["bytes"] in (4096, 1 << 20):
                r["time_seconds"] *= 3     # a stall (1 MiB) and a slow small point
        config = {"shaper": "tbf", "rate": "1gbit", "burst": BURST, "limit": None}
        out = tempfile.mkdtemp(prefix="experiment-bucket-test.")
        try:
            summary = experiment.analyse(rows, experiment.shaping(None, config), config)
            experiment.write_tables(out, summary)
            with open(os.path.join(out, "experiment.json")) as f:
                d = json.load(f)
            self.assertEqual(d["config"], config)
            self.assertEqual(d["model"], "alpha-beta+bucket")
            self.assertEqual(set(d["models"]), {"alpha-beta", "alpha-beta+bucket"})
            notes = {(r["algorithm"], r["workers"], r["bytes"]): r["note"] for r in d["rows"]}
            self.assertEqual(notes[("ps1", 8, 1 << 20)], "stall")
            self.assertEqual(notes[("ps1", 8, 4096)], "latency")
            self.assertEqual(notes[("ring", 8, 1 << 20)], "")
            self.assertEqual(d["within_tolerance"]["outside_by_note"], {"stall": 1, "latency": 1})
            # plot redraws from experiment.json alone: the same rows and config.
            again, cfg = experiment.collect(out)
            self.assertEqual(cfg, config)
            self.assertFalse(set(experiment.DERIVED) & set(again[0]))
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_a_point_whose_jobs_disagree_is_noisy(self):
        link = {"limit_bytes": 8388608}
        base = {"algorithm": "ring", "workers": 4, "bytes": 4096, "ok": True,
                "measured_over_model": 1.5, "model_seconds": 1e-3}
        self.assertEqual(experiment.note(base, link), "latency")
        self.assertEqual(experiment.note(dict(base, repeat_seconds=[1.4e-3, 1.5e-3, 1.65e-3]),
                                         link), "latency")     # the jobs agree: off, not noisy
        self.assertEqual(experiment.note(dict(base, repeat_seconds=[1.1e-3, 1.5e-3, 1.6e-3]),
                                         link), "noisy")       # one job is within 15 %
        self.assertEqual(experiment.note(dict(base, bytes=1 << 16, measured_over_model=0.6,
                                              repeat_seconds=[0.5e-3, 0.6e-3, 1.2e-3]), link),
                         "noisy")                              # jobs on both sides
        # Every job far off, however much they spread: a real miss.
        self.assertEqual(experiment.note(dict(base, bytes=1 << 16, measured_over_model=2.0,
                                              repeat_seconds=[2.0e-3, 2.1e-3, 2.7e-3]), link),
                         "other")
        self.assertEqual(experiment.note(dict(base, bytes=1 << 16), link), "other")
        # Within the tolerance nothing is said, however the jobs spread.
        self.assertEqual(experiment.note(dict(base, measured_over_model=1.1,
                                              repeat_seconds=[1e-3, 2e-3]), link), "")
        # A PS point over its queue keeps that cause.
        ps = dict(base, algorithm="ps1", workers=8, bytes=4 << 20, measured_over_model=1.2,
                  repeat_seconds=[1e-3, 2e-3])
        self.assertEqual(experiment.note(ps, link), "queue")

    def test_base_fills_the_points_a_short_run_did_not_measure(self):
        rows = rows_from_model(ALPHA, BETA, BURST, RATE, ALGS, flow=True)
        config = {"shaper": "tbf", "rate": "1gbit", "burst": BURST, "limit": 8388608,
                  "date": "2026-11-01 10:00 UTC"}
        old_day, new_day = config["date"], "2026-11-27 09:00 UTC"
        tmp = tempfile.mkdtemp(prefix="experiment-base-test.")
        base, new = os.path.join(tmp, "base"), os.path.join(tmp, "new")
        os.makedirs(base)
        os.makedirs(new)
        try:
            experiment.write_tables(
                base, experiment.analyse(rows, experiment.shaping(None, config), config))
            # The short run: the small ring and tree points of N = 4 again,
            # the ring's 4 KiB twice as slow as the base measured it; its
            # rate written another way.
            mine = dict(config, date=new_day, rate="1000mbit")
            with open(os.path.join(new, experiment.CONFIG_NAME), "w") as f:
                json.dump(mine, f)
            old = {(r["algorithm"], r["bytes"]): r["time_seconds"]
                   for r in rows if r["workers"] == 4}
            for alg in ("ring", "tree"):
                with open(os.path.join(new, "N4-%s-small.json" % alg), "w") as f:
                    json.dump({"rows": [{"algorithm": alg, "bytes": k, "busbw": 1.0, "ok": True,
                                         "time_seconds": old[(alg, k)] * (
                                             2 if (alg, k) == ("ring", 4096) else 1)}
                                        for k in (4096, 1 << 14)]}, f)
            here, cfg = experiment.collect(new)
            merged, cfg = experiment.merge_base(here, cfg, base)
            self.assertEqual(len(merged), len(rows))     # every point once
            by = {(r["algorithm"], r["workers"], r["bytes"]): r for r in merged}
            self.assertEqual(by[("ring", 4, 4096)]["source"], new_day)
            self.assertEqual(by[("ring", 4, 4096)]["time_seconds"], 2 * old[("ring", 4096)])
            self.assertEqual(by[("tree", 4, 1 << 14)]["source"], new_day)
            self.assertEqual(by[("ring", 4, 1 << 20)]["source"], old_day)
            self.assertEqual(by[("ring", 8, 4096)]["source"], old_day)
            self.assertEqual(sum(r["source"] == new_day for r in merged), 4)
            self.assertEqual([b["points"] for b in cfg["base"]], [len(rows) - 4])
            self.assertEqual(cfg["base"][0]["config"]["date"], old_day)
            summary = experiment.analyse(merged, experiment.shaping(None, cfg), cfg)
            self.assertEqual(experiment.sources(summary),
                             "4 points from this run (%s), %d (hollow) from earlier ones "
                             "(%s: %d)" % (new_day, len(rows) - 4, old_day, len(rows) - 4))
            self.assertEqual(experiment.fit_sources(summary),
                             "alpha from 6 ring points of the %s run, 2 ring points of this run; "
                             "beta from 8 ring points of the %s run" % (old_day, old_day))
            # plot on the run directory: the report says where the points and
            # the fit come from; a later plot without --base merges again
            # (the run directory also holds its job results, which alone
            # would lose the base's points), --base=none draws the run alone.
            for argv in (["--base=" + base], []):
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    experiment.main(["plot", "--out=" + new] + argv)
                with open(os.path.join(new, "experiment.json")) as f:
                    d = json.load(f)
                self.assertEqual(len(d["rows"]), len(rows), argv)
                self.assertIn("4 points from this run (%s), %d from earlier ones"
                              % (new_day, len(rows) - 4), buf.getvalue())
                self.assertIn("the fit rests on: alpha from", buf.getvalue())
            # Alone, the short run's small points cannot give beta.
            err = io.StringIO()
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(err):
                experiment.main(["plot", "--out=" + new, "--base=none"])
            self.assertEqual(e.exception.code, 1)
            self.assertIn("ring", err.getvalue())
            # Once more with the base, then the base moved away: refused.
            with contextlib.redirect_stdout(io.StringIO()):
                experiment.main(["plot", "--out=" + new, "--base=" + base])
            os.rename(base, base + ".moved")
            with self.assertRaises(SystemExit) as e, \
                    contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                experiment.main(["plot", "--out=" + new])
            self.assertEqual(e.exception.code, 1)
            os.rename(base + ".moved", base)
            # A merged directory of tables as the base of a later run: every
            # row keeps the run that measured it.
            later = os.path.join(tmp, "later")
            os.makedirs(later)
            with open(os.path.join(later, experiment.CONFIG_NAME), "w") as f:
                json.dump(dict(config, date="2026-12-01 08:00 UTC"), f)
            with open(os.path.join(later, "N2-ring-small.json"), "w") as f:
                json.dump({"rows": [{"algorithm": "ring", "bytes": 4096, "busbw": 1.0,
                                     "ok": True, "time_seconds": 1e-3}]}, f)
            tables = os.path.join(tmp, "tables")
            os.makedirs(tables)
            shutil.copy(os.path.join(new, "experiment.json"), tables)
            rows3, cfg3 = experiment.merge_base(*experiment.collect(later), tables)
            labels = {}
            for r in rows3:
                labels[r["source"]] = labels.get(r["source"], 0) + 1
            self.assertEqual(labels, {"2026-12-01 08:00 UTC": 1, new_day: 4,
                                      old_day: len(rows) - 5})
            # A base whose links were shaped otherwise, or that does not
            # say how, is refused (exit 1), as run does before its sweep.
            with open(os.path.join(base, "experiment.json")) as f:
                d = json.load(f)
            for bad in (dict(config, rate="100mbit"), dict(config, burst=4096), None):
                d["config"] = bad
                with open(os.path.join(base, "experiment.json"), "w") as f:
                    json.dump(d, f)
                with self.assertRaises(SystemExit) as e, \
                        contextlib.redirect_stderr(io.StringIO()):
                    experiment.merge_base(here, mine, base)
                self.assertEqual(e.exception.code, 1)
            opts = experiment.parse_args(["run", "--limit=65536", "--base=" + base])[1]
            d["config"] = config
            with open(os.path.join(base, "experiment.json"), "w") as f:
                json.dump(d, f)
            with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
                experiment.read_base(base, experiment.run_config(opts))   # limit differs
            for missing in (os.path.join(base, "missing"), later + "-none"):
                with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
                    experiment.merge_base(here, mine, missing)
            empty = os.path.join(tmp, "empty")
            os.makedirs(empty)
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(io.StringIO()):
                experiment.merge_base(here, mine, empty)
            self.assertEqual(e.exception.code, 1)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
