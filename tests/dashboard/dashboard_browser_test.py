#!/usr/bin/env python3
"""The dashboard in a real browser: a gradsync-server with
--dashboard_listen, 2 gradsync-workers on loopback and two short jobs (ps-sync
then allreduce-sync, 2 workers each; the second waits in the queue while the first
runs), loaded in headless Chromium (Debian's `chromium`).

Checks:
  1. without the token the JSON answers 401, with `Authorization: Bearer`
     200;
  2. while the first job runs, the rendered page (--dump-dom after the page
     drew from its first fetches) lists both jobs, the first running;
  3. after both ended: both job rows SUCCEEDED, the job's charts drew curves
     with points (data-series / data-points of each chart element, set by
     dashboard.js, and a <canvas> per chart), the ranks table has 2 rows, the
     compare view overlays both jobs (2 series per chart, 2 table rows) and
     the workers table lists both workers idle;
  4. a screenshot (1400x1000 and the full page) is saved in
     $GRADSYNC_BUILD_DIR/test_tmp/dashboard/.

The browser opens http://HOST:PORT/?token=TOKEN, which answers 303 with the
dashboard's cookie, as a person would (docs/operations.md, Dashboard).
Every daemon runs in its own process group and is killed when the test ends,
pass or fail. Prints "SKIPPED: <reason>" and exits 77 without chromium or
Fashion-MNIST (CTest: SKIP_RETURN_CODE 77).

  GRADSYNC_BUILD_DIR=build python3 tests/dashboard/dashboard_browser_test.py
"""

import ctypes
import html.parser
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("GRADSYNC_BUILD_DIR", os.path.join(ROOT, "build"))
BIN = os.path.join(BUILD, "bin")
DATA_DIR = "/usr/share/datasets/fashion-mnist"
SKIP = 77
START_TIMEOUT = 20
JOB_TIMEOUT = 180
# Each job: 2 workers, batch 32, the first 4096 samples (64 steps an epoch),
# 1280 steps: 20 epochs, so the accuracy curve has points, and some seconds
# of training, so the loss curve has some (rank 0 reports every 0.5 s).
JOB_FLAGS = ["--workers=2", "--batch_size=32", "--train_limit=4096", "--steps=1280",
             "--model=mlp:784-256-128-10"]

# Loopback only: no proxy from the environment.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
CHARTS = ["chart-loss-step", "chart-loss-time", "chart-acc-step", "chart-acc-time",
          "chart-sps-time", "chart-comm-step"]
COMPARE_CHARTS = ["compare-loss-step", "compare-loss-time", "compare-acc-step",
                  "compare-sps-time"]


def die_with_parent():
    """In the child: SIGKILL when this test process dies."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


class Cluster:
    """The server and its workers; stop() ends them all."""

    def __init__(self, work):
        self.dir = work
        self.token = secrets.token_hex(32)
        self.token_file = os.path.join(work, "token")
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.token)
        self.procs = {}
        lines = self.spawn("server", "gradsync-server", [
            "--listen=127.0.0.1:0", "--dashboard_listen=127.0.0.1:0",
            "--state_dir=" + os.path.join(work, "state")], ["listening on ", "dashboard at "])
        self.server = lines["listening on "]
        # "http://HOST:PORT/" -> "HOST:PORT"
        self.dashboard = lines["dashboard at "].split("//", 1)[1].rstrip("/")
        for w in range(2):
            self.spawn("worker%d" % w, "gradsync-worker", [
                "--coordinator=" + self.server, "--listen=127.0.0.1:0", "--id=w%d" % w,
                "--cache_dir=" + os.path.join(work, "cache%d" % w)], ["listening on "])

    def spawn(self, name, binary, args, wanted):
        """Starts a daemon; returns the rest of each `wanted` stdout line."""
        out = os.path.join(self.dir, name + ".out")
        argv = [os.path.join(BIN, binary)] + args + [
            "--token_file=" + self.token_file, "--log_level=warn"]
        with open(out, "w") as o, open(os.path.join(self.dir, name + ".log"), "w") as e:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=o, stderr=e,
                                 start_new_session=True, preexec_fn=die_with_parent)
        self.procs[name] = p
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            found = {}
            with open(out) as f:
                for line in f:
                    for w in wanted:
                        if line.startswith(w) and line.endswith("\n"):
                            found[w] = line[len(w):].strip()
            if len(found) == len(wanted):
                return found
            if p.poll() is not None:
                raise RuntimeError("%s exited %d at start" % (name, p.returncode))
            time.sleep(0.05)
        raise RuntimeError("%s did not start in %d s" % (name, START_TIMEOUT))

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5
        for p in self.procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs = {}

    def api(self, path, token=True):
        """(status, parsed JSON or None) of GET path on the dashboard."""
        req = urllib.request.Request("http://" + self.dashboard + path)
        if token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with OPENER.open(req, timeout=5) as r:
                return r.status, json.loads(r.read().decode())
        except urllib.error.HTTPError as e:
            return e.code, None

    def submit(self, name, strategy):
        out = subprocess.run(
            [os.path.join(BIN, "gradsync"), "submit", "--server=" + self.server,
             "--token_file=" + self.token_file, "--name=" + name, "--strategy=" + strategy,
             "--mode=sync"] + JOB_FLAGS,
            capture_output=True, text=True, timeout=30, check=True)
        return out.stdout.split()[-1]


class Dom(html.parser.HTMLParser):
    """Attributes of elements by id, rows per table body, canvases."""

    def __init__(self, text):
        super().__init__()
        self.by_id = {}
        self.rows = {}       # table id -> [attrs of each <tr> in its tbody]
        self.canvases = 0
        self.body = {}
        self._table = None
        self._in_body = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.by_id[a["id"]] = a
        if tag == "body":
            self.body = a
        elif tag == "table":
            self._table = a.get("id")
            self.rows.setdefault(self._table, [])
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body and self._table:
            self.rows[self._table].append(a)
        elif tag == "canvas":
            self.canvases += 1

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_body = False
        elif tag == "table":
            self._table = None


def chromium_binary():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browse(chromium, url, work, extra, timeout=60):
    """Runs headless Chromium on url with `extra` flags; returns stdout."""
    argv = [chromium, "--headless", "--disable-gpu", "--no-sandbox",
            "--disable-dev-shm-usage", "--hide-scrollbars", "--no-proxy-server",
            "--user-data-dir=" + os.path.join(work, "profile"),
            # Virtual time runs the page's timers and fetches without waiting
            # in real time: the first polls have drawn when the budget ends.
            "--virtual-time-budget=4000"] + extra + [url]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError("chromium exited %d: %s" % (p.returncode, p.stderr[-2000:]))
    return p.stdout


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


def wait_for(cluster, pred, what, timeout=JOB_TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, overview = cluster.api("/api/overview")
        if status == 200 and pred(overview):
            return overview
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


def jobs_of(overview):
    return {j["job"]["id"]: j for j in overview["jobs"]}


def points(dom, chart):
    return int(dom.by_id.get(chart, {}).get("data-points", "0"))


def series(dom, chart):
    return int(dom.by_id.get(chart, {}).get("data-series", "0"))


def run(chromium, work, shots):
    cluster = Cluster(work)
    try:
        url = "http://%s/?token=%s" % (cluster.dashboard, cluster.token)
        check(cluster.api("/api/overview", token=False)[0] == 401,
              "/api/overview without the token: 401")
        wait_for(cluster, lambda o: len(o["workers"]) == 2, "2 workers", START_TIMEOUT)
        first = cluster.submit("dash-ps", "ps")
        second = cluster.submit("dash-allreduce", "allreduce")

        def first_has_points(o):
            j = jobs_of(o).get(first)
            if not j or j["job"]["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                raise AssertionError("the first job ended before it was seen running")
            return j["job"]["state"] == "RUNNING" and j["latest"] and \
                j["latest"]["step"] >= 20
        try:
            wait_for(cluster, first_has_points, "the first job's progress")
            dom = Dom(browse(chromium, url, work, ["--dump-dom"]))
            states = {r.get("data-job-id"): r.get("data-state") for r in dom.rows["jobs"]}
            check(first in states and second in states, "mid-run: both jobs listed")
            check(dom.body.get("data-ready") == "1", "mid-run: the page rendered")
            print("mid-run states:", states, "points:", points(dom, "chart-loss-step"))
        except AssertionError as e:
            # The first job may have ended before Chromium started.
            print("mid-run check not made:", e)

        both_ended = wait_for(cluster, lambda o: all(
            jobs_of(o).get(i, {}).get("job", {}).get("state") in
            ("SUCCEEDED", "FAILED", "CANCELLED") for i in (first, second)), "both jobs")
        for i in (first, second):
            job = jobs_of(both_ended)[i]["job"]
            check(job["state"] == "SUCCEEDED", "%s succeeded in %.1f s" % (
                i, job["result"]["wall_seconds"]))
        status, detail = cluster.api("/api/jobs/" + second)
        check(status == 200 and len(detail["curve"]["step"]) >= 3,
              "/api/jobs/%s: %d curve points" % (second, len(detail["curve"]["step"])))
        check(len(detail["accuracy"]["step"]) >= 1, "accuracy points from the epochs")

        dom = Dom(browse(chromium, url, work, ["--dump-dom"]))
        check(dom.body.get("data-ready") == "1", "the page rendered (data-ready)")
        rows = {r.get("data-job-id"): r.get("data-state") for r in dom.rows["jobs"]}
        check(rows.get(first) == "SUCCEEDED" and rows.get(second) == "SUCCEEDED",
              "both job rows SUCCEEDED: %s" % rows)
        check(dom.by_id.get("detail", {}).get("data-job-id") in (first, second),
              "a job is shown in detail")
        for chart in CHARTS:
            check(series(dom, chart) >= 1 and points(dom, chart) >= 1,
                  "%s: %d series, %d points" % (chart, series(dom, chart), points(dom, chart)))
        check(points(dom, "chart-loss-step") >= 3, "the loss curve has 3+ points")
        check(len(dom.rows["ranks"]) == 2, "ranks table: 2 ranks")
        slowest = [r for r in dom.rows["ranks"] if r.get("data-slowest")]
        check(len(slowest) == 1 and float(slowest[0]["data-slowest"]) >= 1,
              "ranks table: one slowest rank, its compute / the other's >= 1: %s" % slowest)
        compared = dom.by_id.get("compare", {}).get("data-jobs", "").split(",")
        check(sorted(compared) == sorted([first, second]),
              "compare view overlays both jobs: %s" % compared)
        for chart in COMPARE_CHARTS:
            check(series(dom, chart) == 2 and points(dom, chart) >= 2,
                  "%s: %d series, %d points" % (chart, series(dom, chart), points(dom, chart)))
        check(len(dom.rows["compare-table"]) == 2, "compare table: 2 rows")
        check(dom.canvases >= len(CHARTS) + len(COMPARE_CHARTS),
              "%d <canvas> elements (uPlot drew)" % dom.canvases)
        workers = dom.rows["workers"]
        check(len(workers) == 2, "workers table: 2 workers")

        for name, size in (("dashboard.png", "1400,1000"), ("dashboard-full.png", "1400,2400")):
            path = os.path.join(shots, name)
            browse(chromium, url, work, ["--screenshot=" + path, "--window-size=" + size])
            check(os.path.getsize(path) > 10000, "screenshot " + path)
    finally:
        cluster.stop()


def main():
    chromium = chromium_binary()
    if chromium is None:
        print("SKIPPED: no chromium (apt-get install chromium)")
        return SKIP
    if not os.path.isdir(DATA_DIR):
        print("SKIPPED: no Fashion-MNIST at %s (apt-get install dataset-fashion-mnist)"
              % DATA_DIR)
        return SKIP
    for binary in ("gradsync", "gradsync-server", "gradsync-worker"):
        if not os.path.exists(os.path.join(BIN, binary)):
            print("FAILED: %s not built in %s" % (binary, BIN))
            return 1
    shots = os.path.join(BUILD, "test_tmp", "dashboard")
    os.makedirs(shots, exist_ok=True)
    work = tempfile.mkdtemp(prefix="gradsync-dashboard.")
    try:
        run(chromium, work, shots)
    except AssertionError as e:
        print("FAILED:", e)
        print("daemon logs in", work)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("PASSED; screenshots in", shots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
