#!/usr/bin/env python3
"""Checks the parts of bench/experiments/experiment.py's package
(bench/experiments/gradsync_experiment/) that the model tests do not reach: the entry
point (--help, its exit codes, the names it re-exports), the command line's
refusals, the emulated cluster's command lines and failures (no network,
no root needed: subprocess is faked), SIGTERM as SystemExit, the report's
text and, where python3-matplotlib is, the plots. Standard library only
otherwise."""
import contextlib
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENTRY = os.path.join(ROOT, "bench", "experiments", "experiment.py")
spec = importlib.util.spec_from_file_location("experiment", ENTRY)
experiment = importlib.util.module_from_spec(spec)
spec.loader.exec_module(experiment)   # puts bench/ on sys.path

import experiment_model  # noqa: E402  (bench/experiments/experiment_model.py)
import gradsync_experiment  # noqa: E402
from gradsync_experiment import (  # noqa: E402
    analysis, cli, common, plots, report, results, sweep)

ALPHA, BETA, RATE, BURST = 100e-6, 118e6, 125e6, 73728


def refusal(fn, *args):
    """(exit code, stderr) of fn(*args), which must exit."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            fn(*args)
        except SystemExit as e:
            return e.code, err.getvalue()
    raise AssertionError("%s%r did not exit" % (fn.__name__, args))


def model_rows():
    """Rows at the bucket model's times: every algorithm one per host at
    N = 2, 4, 8, ring and hier two per host at N = 4, 8."""
    rows = []
    for n in (2, 4, 8):
        for k in (4096, 1 << 14, 1 << 20, 1 << 24):
            for alg, per_host in [(a, 1) for a in sweep.SWEEP] + [("ring", 2), ("hier", 2)]:
                if per_host > 1 and n == 2:
                    continue
                r = {"workers": n, "per_host": per_host, "algorithm": alg, "bytes": k,
                     "ok": True, "job_alpha": 20e-6, "job_beta": 2e9}
                r["time_seconds"] = experiment_model.row_model(r, ALPHA, BETA, BURST, RATE,
                                                               flow=True)
                rows.append(r)
    return rows


def summary_of(rows):
    config = {"shaper": "tbf", "rate": "1gbit", "burst": BURST, "limit": 8388608,
              "date": "2026-11-27 09:00 UTC"}
    return analysis.analyse(rows, analysis.shaping(None, config), config)


class EntryPointTest(unittest.TestCase):
    def run_entry(self, *argv):
        return subprocess.run([sys.executable, ENTRY] + list(argv), capture_output=True,
                              text=True)

    def test_help_prints_the_package_text(self):
        for argv, code in ((["--help"], 0), (["run", "-h"], 0), (["plot", "--help"], 0),
                           ([], 2), (["draw"], 2)):
            r = self.run_entry(*argv)
            self.assertEqual(r.returncode, code, argv)
            self.assertEqual(r.stdout, gradsync_experiment.USAGE + "\n", argv)
        self.assertIn("python3 bench/experiments/experiment.py run", gradsync_experiment.USAGE)
        self.assertIn("bench/experiments/netem-cluster.sh", gradsync_experiment.USAGE)

    def test_unknown_arguments_are_refused_in_one_line(self):
        r = self.run_entry("plot", "--colour=red")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, "experiment: unknown argument --colour=red (see --help)\n")

    def test_the_entry_point_reexports_the_packages_own_objects(self):
        for name, module in (("main", cli), ("parse_args", cli), ("analyse", analysis),
                             ("note", analysis), ("TIE_SLACK", analysis),
                             ("collect", results), ("merge_base", results),
                             ("CONFIG_NAME", results), ("sources", report),
                             ("Cluster", sweep), ("run_config", sweep),
                             ("model", experiment_model), ("Link", experiment_model)):
            self.assertIs(getattr(experiment, name), getattr(module, name), name)


class CommandLineTest(unittest.TestCase):
    def test_defaults(self):
        cmd, opts = cli.parse_args(["run"])
        self.assertEqual(cmd, "run")
        self.assertEqual(opts["workers"], [2, 3, 4])
        self.assertEqual(opts["algorithms"], sweep.SWEEP)
        self.assertEqual(opts["burst"], str(experiment_model.DEFAULT_BURST))
        self.assertEqual((opts["iters"], opts["iters-small"], opts["repeats-small"],
                          opts["hier-per-host"]), (3, 20, 3, 2))
        # plot: no --burst is the run's configuration's (shaping()).
        self.assertIsNone(cli.parse_args(["plot"])[1]["burst"])
        # An empty list keeps the default count.
        self.assertEqual(cli.parse_args(["run", "--iters="])[1]["iters"], 3)

    def test_refusals(self):
        for argv, said in (
                (["run", "--workers=1"], "--workers: each value must be 2..16"),
                (["run", "--workers=a"], "--workers takes integers separated by commas"),
                (["run", "--shaper=htb"], "--shaper must be netem or tbf"),
                (["run", "--burst=1k"], "--burst takes a byte count, got '1k'"),
                (["run", "--peer-bulk-bytes=-2"], "--peer-bulk-bytes takes a byte count or -1"),
                (["run", "--algorithms=ring,bus"], "unknown algorithm bus (want ring,hd"),
                (["plot", "--burst="], "plot --burst= takes a byte count"),
                (["run", "--out"], "unknown argument --out (see --help)")):
            code, err = refusal(cli.parse_args, argv)
            self.assertEqual(code, 2, argv)
            self.assertTrue(err.startswith("experiment: "), (argv, err))
            self.assertIn(said, err, argv)

    def test_parse_command_names_its_program(self):
        code, err = refusal(cli.parse_command, ["run", "--x=1"], "doc", {"y": ""}, "other")
        self.assertEqual((code, err), (2, "other: unknown argument --x=1 (see --help)\n"))


class CommonTest(unittest.TestCase):
    def test_root_is_the_repository(self):
        self.assertTrue(os.path.isfile(
            os.path.join(common.ROOT, "bench", "experiments", "experiment.py")))

    def test_read_json_says_which_file(self):
        tmp = tempfile.mkdtemp(prefix="experiment-package-test.")
        try:
            path = os.path.join(tmp, "half.json")
            with open(path, "w") as f:
                f.write("{")
            code, err = refusal(common.read_json, path, "someprog")
            self.assertEqual(code, 1)
            self.assertTrue(err.startswith("someprog: %s is not valid JSON" % path), err)
            code, err = refusal(common.read_json, os.path.join(tmp, "none.json"))
            self.assertEqual(code, 1)
            self.assertTrue(err.startswith("experiment: cannot read "), err)
            with open(path, "w") as f:
                json.dump({"a": 1}, f)
            self.assertEqual(common.read_json(path), {"a": 1})
        finally:
            shutil.rmtree(tmp)


class SweepTest(unittest.TestCase):
    OPTS = {"rate": "1gbit", "shaper": "tbf", "burst": "73728", "limit": "", "build-dir": "b",
            "ps-reduce-threads": "", "ps-partition-bytes": "", "peer-bulk-bytes": ""}

    def cluster(self, **opts):
        c = sweep.Cluster(dict(self.OPTS, **opts), 3, 1)
        shutil.rmtree(c.state, ignore_errors=True)
        return c

    def test_the_cluster_script_is_in_bench(self):
        c = self.cluster()
        self.assertEqual(c.cmd, ["bash", os.path.join(common.ROOT, "bench", "experiments",
                                                      "netem-cluster.sh")])
        self.assertTrue(os.path.isfile(c.cmd[1]), c.cmd[1])
        self.assertEqual(c.binary, os.path.join(common.ROOT, "b", "bin", "gradsync"))
        self.assertIn("--burst=73728", c.up)
        # netem has no bucket: --burst is not passed.
        self.assertFalse([f for f in self.cluster(shaper="netem").up if "--burst" in f])

    def test_bench_runs_one_job_from_h0(self):
        c = self.cluster()
        with mock.patch.object(sweep.subprocess, "run",
                               return_value=subprocess.CompletedProcess([], 0)) as run, \
                contextlib.redirect_stdout(io.StringIO()):
            c.bench(4, "psN", "4K", 20, "out.json", ["--ps_shards=4"])
            c.bench(4, "ring", "", 20, "none.json")   # no sizes: no job
        self.assertEqual(run.call_count, 1)
        argv = run.call_args[0][0]
        self.assertEqual(argv[:3] + [argv[3 + len(c.flags)]], c.cmd + ["run", "0"])
        self.assertIn("--op=pushpull", argv)
        self.assertIn("--ps_shards=4", argv)
        self.assertIn("--results=" + os.path.abspath("out.json"), argv)

    def test_a_failed_up_exits_with_its_reason(self):
        for rc, code, said in ((3, 3, "cannot run on this machine"),
                               (2, 1, "bench/experiments/netem-cluster.sh up failed (status 2)")):
            c = self.cluster()
            with mock.patch.object(sweep.subprocess, "run",
                                   return_value=subprocess.CompletedProcess([], rc)):
                got, err = refusal(c.__enter__)
            self.assertEqual(got, code)
            self.assertIn(said, err)

    def test_run_needs_root(self):
        with mock.patch.object(sweep.os, "geteuid", return_value=1000):
            code, err = refusal(sweep.run, {"out": "never-made"})
        self.assertEqual(code, 2)
        self.assertIn("run needs root", err)
        self.assertFalse(os.path.exists("never-made"))

    def test_sigterm_is_system_exit(self):
        old = signal.getsignal(signal.SIGTERM)
        try:
            sweep.exit_on_sigterm()
            with self.assertRaises(SystemExit) as e:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)   # the handler raises here at the latest
            self.assertEqual(e.exception.code, 143)
        finally:
            signal.signal(signal.SIGTERM, old)


class ResultsTest(unittest.TestCase):
    def test_link_differences_compare_rates_in_bytes(self):
        mine = {"shaper": "tbf", "rate": "1gbit", "burst": 73728, "limit": None}
        self.assertEqual(results.link_differences(mine, dict(mine, rate="1000mbit")), [])
        self.assertEqual(results.link_differences(mine, dict(mine, rate="100mbit", burst=1)),
                         ["rate 1gbit here, 100mbit there", "burst 73728 here, 1 there"])

    def test_nothing_to_remember_without_a_drawn_merge(self):
        tmp = tempfile.mkdtemp(prefix="experiment-package-test.")
        try:
            self.assertIsNone(results.remembered_base(tmp))
            with open(os.path.join(tmp, "N2-ring.json"), "w") as f:
                json.dump({"rows": []}, f)
            with open(os.path.join(tmp, "experiment.json"), "w") as f:
                json.dump({"config": {"date": "x"}, "rows": []}, f)
            self.assertIsNone(results.remembered_base(tmp))
        finally:
            shutil.rmtree(tmp)


class ReportTest(unittest.TestCase):
    def test_small_texts(self):
        self.assertEqual(report.human(64 << 20), "64 MiB")
        self.assertEqual(report.human(16 << 10), "16 KiB")
        self.assertEqual(report.human(3 << 19), "1536 KiB")
        self.assertEqual(report.human(1000), "1000 B")
        self.assertEqual(report.model_crossover_text(None), "never")
        self.assertEqual(report.model_crossover_text(0), "ring faster at every size")
        self.assertEqual(report.model_crossover_text(12345.6, "tie"), "12346 (then equal)")
        self.assertEqual(report.model_crossover_text(12345.6, "ring"), "12346")
        self.assertEqual(report.ratio_text({"measured_over_model": None}), "")
        self.assertEqual(report.ratio_text({"measured_over_model": 1.234}),
                         " (measured/model 1.23)")
        rows = [{"algorithm": "ring", "workers": n, "bytes": 4096, "ok": True,
                 "time_seconds": 2 * (n - 1) * a}
                for n, a in ((2, 50e-6), (4, 80e-6))]
        self.assertEqual(report.per_message_range(rows), "50-80")
        self.assertEqual(report.per_message_range([]), "-")

    def test_report_of_model_points(self):
        rows = model_rows()
        summary = summary_of(rows)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            report.report(summary)
        text = out.getvalue()
        self.assertIn("link: tbf at 1gbit (the run's config); bucket 73728 B", text)
        self.assertIn("fit, alpha-beta+bucket (plotted): alpha 100.0 us, beta 118.0 MB/s",
                      text)
        self.assertIn("within 15%% of the alpha-beta+bucket model: %d of %d points"
                      % (len(rows), len(rows)), text)
        # One line per row below the header, and no point from another run.
        header = [i for i, line in enumerate(text.splitlines()) if line.split()[:3] ==
                  ["N", "ph", "alg"]]
        self.assertEqual(len(header), 1)
        self.assertNotIn("points from this run", text)
        self.assertEqual(report.sources(summary), "")


class PlotsTest(unittest.TestCase):
    def test_model_name(self):
        summary = summary_of(model_rows())
        self.assertTrue(plots.model_name(summary).startswith(
            "alpha-beta + 72 KiB token bucket (tbf)"))
        summary["model"] = analysis.PLAIN
        self.assertEqual(plots.model_name(summary),
                         "alpha-beta, tree and push/pull message by message")

    def test_plots_are_drawn(self):
        if not plots.have_matplotlib():
            self.skipTest("no python3-matplotlib")
        tmp = tempfile.mkdtemp(prefix="experiment-package-test.")
        try:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                plots.plot(tmp, summary_of(model_rows()))
            names = ["time_vs_size.png", "time_vs_workers.png", "hier_vs_ring.png"]
            self.assertEqual(out.getvalue(), "wrote %s\n" % ", ".join(
                os.path.join(tmp, n) for n in names))
            for n in names:
                with open(os.path.join(tmp, n), "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", n)
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main()
