#!/usr/bin/env python3
"""The Python client (python/gradsync) against real daemons: a
gradsync-server and 2 gradsync-worker processes on loopback ports of their
choosing (--listen=127.0.0.1:0, read back from their "listening on" line),
with a token file. Tiny jobs (2 workers, an MLP of 784-32-10, the first 1024
samples: 16 steps) for ps and ring: watched, waited for, their results
checked; a cancelled job; a wrong and a missing token (UNAUTHENTICATED); bad
specs (INVALID_ARGUMENT from the server, SpecError from the client);
uploads; deadlines on an unreachable and on a frozen (SIGSTOPped)
coordinator; a cluster with mutual TLS (deploy/make-dev-certs.sh): a job
through it, and a client without TLS or with another CA refused.

Every daemon runs in a process group of its own, is killed (SIGTERM, then
SIGKILL) when the tests end, pass or fail, and dies with this process
(PR_SET_PDEATHSIG) should it be killed.

  /usr/bin/python3 tests/python/test_client.py [-v] [unittest args]

Environment: GRADSYNC_BIN_DIR (default build/bin), GRADSYNC_PY_STUBS (the
generated modules; python/gradsync/_stubs.py says where else it looks),
GRADSYNC_PY_SKIP (a reason to skip, set by CMake when it could not generate
the modules). Prints "SKIPPED: <reason>" and exits 77 without gRPC for
Python or Fashion-MNIST (CTest: SKIP_RETURN_CODE 77).
"""

import ctypes
import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN_DIR = os.environ.get("GRADSYNC_BIN_DIR", os.path.join(ROOT, "build", "bin"))
DATA_DIR = "/usr/share/datasets/fashion-mnist"   # the workers' default
SKIP_CODE = 77
START_TIMEOUT = 30.0
# 2 workers x batch 32 over the first 1024 samples: 16 steps.
TINY = dict(workers=2, epochs=1, batch_size=32, train_limit=1024, model="mlp:784-32-10")

sys.path.insert(0, os.path.join(ROOT, "python"))
gradsync = None   # imported by main() once it knows it can
grpc = None
CLUSTERS = []     # every Cluster started, stopped at the end whatever happens

# As python/gradsync/__init__.py does for its users, before grpc is first
# imported (skip_reason below imports it): grpcio 1.51's fork handlers can
# wait forever when this test starts a daemon while a channel is busy
# (grpc/grpc#31885; seen here once as a 300 s timeout).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


def skip_reason():
    if os.environ.get("GRADSYNC_PY_SKIP"):
        return os.environ["GRADSYNC_PY_SKIP"]
    try:
        import grpc as _grpc  # noqa: F401
        import google.protobuf  # noqa: F401
    except ImportError as e:
        return "no gRPC for Python in %s (%s): apt-get install python3-grpcio python3-protobuf" % (
            sys.executable, e)
    if not os.path.isdir(DATA_DIR):
        return "no Fashion-MNIST at %s (apt-get install dataset-fashion-mnist)" % DATA_DIR
    return ""


def _die_with_parent():
    """In the child: SIGKILL when this test process dies (prctl
    PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


class Cluster:
    """A gradsync-server (coordinator + PS shard 0) and `workers` workers, or
    only the server. Each daemon has its own process group; stop() ends them
    all and is idempotent."""

    def __init__(self, workers, tls_dir=None):
        self.dir = tempfile.mkdtemp(prefix="gradsync-pyclient.")
        self.tls = [] if tls_dir is None else [
            "--tls_%s=%s" % (flag, os.path.join(tls_dir, name))
            for flag, name in (("cert", "cert.pem"), ("key", "key.pem"), ("ca", "ca.pem"))]
        self.token_file = os.path.join(self.dir, "token")
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        self.procs = {}   # name -> Popen
        CLUSTERS.append(self)
        self.server = self._spawn("server", "gradsync-server", [
            "--listen=127.0.0.1:0", "--role=all", "--heartbeat_timeout=6",
            "--state_dir=" + os.path.join(self.dir, "state")])
        for w in range(workers):
            self._spawn("worker%d" % w, "gradsync-worker", [
                "--coordinator=" + self.server, "--listen=127.0.0.1:0", "--id=py%d" % w,
                "--cache_dir=" + os.path.join(self.dir, "cache%d" % w)])

    def _spawn(self, name, binary, args):
        """Starts a daemon; returns the address it announces."""
        out = os.path.join(self.dir, name + ".out")
        log = os.path.join(self.dir, name + ".log")
        argv = [os.path.join(BIN_DIR, binary)] + args + [
            "--token_file=" + self.token_file, "--log_level=warn"] + self.tls
        with open(out, "w") as o, open(log, "w") as e:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=o, stderr=e,
                                 start_new_session=True, preexec_fn=_die_with_parent)
        self.procs[name] = p
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            with open(out) as f:
                for line in f:
                    if line.startswith("listening on ") and line.endswith("\n"):
                        address = line[len("listening on "):].strip()
                        return address.replace("0.0.0.0:", "127.0.0.1:")
            if p.poll() is not None:
                raise RuntimeError("%s exited %d during start-up:\n%s" % (
                    name, p.returncode, self.log_tail(name)))
            time.sleep(0.02)
        raise RuntimeError("%s did not start in %g s:\n%s" % (
            name, START_TIMEOUT, self.log_tail(name)))

    def log_tail(self, name, lines=10):
        try:
            with open(os.path.join(self.dir, name + ".log")) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def signal_server(self, sig):
        os.killpg(self.procs["server"].pid, sig)

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGCONT)   # a stopped one cannot handle SIGTERM
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5
        for p in self.procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        self.procs = {}
        shutil.rmtree(self.dir, ignore_errors=True)


CLUSTER = None


def setUpModule():
    global CLUSTER
    CLUSTER = Cluster(workers=2)
    with gradsync.Client(CLUSTER.server, token_file=CLUSTER.token_file) as c:
        c.wait_for_workers(2, timeout=START_TIMEOUT)


def tearDownModule():
    for c in CLUSTERS:
        c.stop()


class ClientTest(unittest.TestCase):
    """One cluster for every test (setUpModule); each test starts with both
    workers idle."""

    def setUp(self):
        self.client = gradsync.Client(CLUSTER.server, token_file=CLUSTER.token_file)
        self.addCleanup(self.client.close)
        self.client.wait_for_workers(2, idle=True, timeout=60)

    def run_tiny(self, strategy):
        """Submits a tiny `strategy` job, watches it to its end; (job,
        events, results)."""
        job = self.client.submit(strategy=strategy, mode="sync", name="py-" + strategy, **TINY)
        self.assertRegex(job.id, r"\S+")
        self.assertIn(job.state, ("QUEUED", "RUNNING"))
        events = list(job.watch(timeout=120))
        self.assertEqual(job.wait(timeout=30), "SUCCEEDED", job.status())
        return job, events, job.results()

    def check_tiny(self, job, events, r, strategy):
        kinds = [e["kind"] for e in events]
        self.assertIn("epoch", kinds)
        states = [e["state"] for e in events if e["kind"] == "state"]
        self.assertIn("RUNNING", states)
        self.assertEqual(states[-1], "SUCCEEDED")
        self.assertEqual(events[-1]["job"]["state"], "SUCCEEDED")
        self.assertEqual(job.state, "SUCCEEDED")
        self.assertEqual((r["job_id"], r["state"], r["error_code"]), (job.id, "SUCCEEDED", "OK"))
        self.assertEqual((r["strategy"], r["mode"], r["workers"]), (strategy, "sync", 2))
        self.assertEqual((r["model"], r["batch_size"], r["global_batch"]),
                         ("mlp:784-32-10", 32, 64))
        self.assertEqual(r["steps"], 16)
        self.assertFalse(r["weight_prediction"])   # sync: nothing to predict
        self.assertEqual(r["num_params"], 784 * 32 + 32 + 32 * 10 + 10)
        self.assertGreater(r["test_accuracy"], 0.3)   # 10 classes: chance is 0.1
        self.assertGreater(r["samples_per_second"], 0)
        self.assertEqual(len(r["param_checksums"]), 2)
        self.assertEqual(len(r["worker_ids"]), 2)
        rows = job.rows()
        self.assertEqual([row["epoch"] for row in rows], [1])
        self.assertEqual(rows, r["per_epoch"])
        self.assertAlmostEqual(rows[0]["test_accuracy"], r["test_accuracy"], places=6)
        for row in job.rows("progress"):
            self.assertLessEqual(row["step"], row["total_steps"])

    def test_ps_job_is_watched_to_success_with_results(self):
        job, events, r = self.run_tiny("ps")
        self.check_tiny(job, events, r, "ps")
        self.assertEqual(r["ps_shards"], 1)

    def test_allreduce_job_is_watched_to_success_with_identical_replicas(self):
        # "ring", the strategy's old name, still reads; results say "allreduce".
        job, events, r = self.run_tiny("ring")
        self.check_tiny(job, events, r, "allreduce")
        self.assertEqual(r["param_checksums"][0], r["param_checksums"][1])
        self.assertEqual(r["ps_shards"], 0)
        self.assertTrue(r["bucket_algorithms"])

    def test_a_ring_async_job_predicts_weights_unless_told_not_to(self):
        for option, want in (("auto", True), ("off", False)):
            with self.subTest(weight_prediction=option):
                job = self.client.submit(strategy="allreduce", mode="async", name="py-wp-" + option,
                                         weight_prediction=option, **TINY)
                self.assertEqual(job.wait(timeout=120), "SUCCEEDED", job.status())
                r = job.results()
                self.assertEqual((r["mode"], r["weight_prediction"]), ("async", want))
                self.assertEqual(r["param_checksums"][0], r["param_checksums"][1])

    def test_an_elastic_job_reports_its_generation(self):
        job = self.client.submit(strategy="ps", mode="async", name="py-elastic",
                                 elastic=True, min_workers=1, **TINY)
        self.assertEqual(job.wait(timeout=120), "SUCCEEDED", job.status())
        r = job.results()
        self.assertEqual((r["elastic"], r["min_workers"], r["generation"]), (True, 1, 0))
        self.assertEqual(r["checkpoint_every"], 50)   # the elastic default
        self.assertEqual(len(r["generations"]), 1)
        g = r["generations"][0]
        self.assertTrue(g["committed"])
        self.assertEqual((g["generation"], g["start_step"], g["lost_rank"]), (0, 0, -1))
        self.assertEqual(g["worker_ids"], r["worker_ids"])

    def test_a_running_job_times_out_a_wait_then_is_cancelled(self):
        job = self.client.submit(strategy="allreduce", workers=2, epochs=50, model="mlp:784-32-10")
        for ev in job.watch(timeout=60):
            if ev["kind"] == "progress" or ev.get("state") == "RUNNING":
                break   # ends the stream, not the job
        started = time.monotonic()
        with self.assertRaises(gradsync.WaitTimeout) as cm:
            job.wait(timeout=1.0)
        self.assertLess(time.monotonic() - started, 10)
        self.assertEqual(cm.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertEqual(self.client.status(job.id)["state"], "RUNNING")
        job.cancel()
        self.assertEqual(job.wait(timeout=60), "CANCELLED")
        self.assertEqual(job.results()["error_code"], "CANCELLED")
        # Cancelling an ended job changes nothing.
        self.assertEqual(self.client.cancel(job.id)["state"], "CANCELLED")

    def test_list_and_status(self):
        listed = self.client.list()
        self.assertEqual(sorted(w["id"] for w in listed["workers"]), ["py0", "py1"])
        self.assertEqual(listed["ps_shards"], 1)
        for j in listed["jobs"]:
            self.assertEqual(self.client.status(j["job_id"])["state"], j["state"])
        with self.assertRaises(gradsync.RpcError) as cm:
            self.client.status("no-such-job")
        self.assertEqual(cm.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(cm.exception.rpc, "GetJob")
        with self.assertRaises(gradsync.RpcError) as cm:
            list(self.client.job("no-such-job").watch(timeout=10))
        self.assertEqual(cm.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_bad_specs_are_refused_with_invalid_argument(self):
        # Refused by the coordinator (common/spec/job_spec.h), naming the field.
        for fields, field in (({"model": "mlp:100-64-10"}, "model"),
                              ({"batch_size": 0}, "batch_size"),
                              ({"workers": 0}, "workers"),
                              ({"staleness": -3}, "staleness"),
                              ({"weight_prediction": "on"}, "weight_prediction")):
            opts = dict(TINY, **fields)
            with self.subTest(field=field):
                with self.assertRaises(gradsync.RpcError) as cm:
                    self.client.submit(**opts)
                self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
                self.assertEqual(cm.exception.rpc, "SubmitJob")
                self.assertIn(field, cm.exception.message)
        # Refused here, before any call.
        for fields, field in (({"strategy": "gossip"}, "strategy"),
                              ({"algorithm": "butterfly"}, "algorithm"),
                              ({"weight_prediction": "maybe"}, "weight_prediction"),
                              ({"workers": "2"}, "workers")):
            with self.subTest(field=field):
                with self.assertRaises(gradsync.SpecError) as cm:
                    self.client.submit(**fields)
                self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn(field, str(cm.exception))
        jobs = len(self.client.list()["jobs"])
        with self.assertRaises(TypeError):
            self.client.submit(epochz=1)
        with self.assertRaises(gradsync.GradsyncError) as cm:
            self.client.submit(model="torchscript:/no/such/model.pt")
        self.assertEqual(cm.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(len(self.client.list()["jobs"]), jobs)

    def test_wrong_or_missing_token_is_unauthenticated(self):
        saved = os.environ.pop("GRADSYNC_TOKEN", None)
        try:
            for kwargs in ({"token": "x" * 32}, {}):
                with self.subTest(token=kwargs.get("token", "none")):
                    with gradsync.Client(CLUSTER.server, **kwargs) as c:
                        with self.assertRaises(gradsync.RpcError) as cm:
                            c.list()
                        self.assertEqual(cm.exception.code, grpc.StatusCode.UNAUTHENTICATED)
                        self.assertIn("token", cm.exception.message)
                        with self.assertRaises(gradsync.RpcError) as cm:
                            c.submit(**TINY)
                        self.assertEqual(cm.exception.code, grpc.StatusCode.UNAUTHENTICATED)
            with open(CLUSTER.token_file) as f:
                os.environ["GRADSYNC_TOKEN"] = f.read()
            with gradsync.Client(CLUSTER.server) as c:
                self.assertEqual(len(c.list()["workers"]), 2)
        finally:
            os.environ.pop("GRADSYNC_TOKEN", None)
            if saved is not None:
                os.environ["GRADSYNC_TOKEN"] = saved
        with self.assertRaises(gradsync.ConfigError):
            gradsync.Client(CLUSTER.server, token="short")
        with self.assertRaises(gradsync.ConfigError) as cm:
            gradsync.Client(CLUSTER.server, token_file="/no/such/token")
        self.assertEqual(cm.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_upload_sends_a_file_once_by_its_hash(self):
        path = os.path.join(CLUSTER.dir, "blob.bin")
        data = os.urandom((1 << 20) + 7)   # two chunks
        with open(path, "wb") as f:
            f.write(data)
        sha = self.client.upload(path)
        self.assertEqual(sha, hashlib.sha256(data).hexdigest())
        self.assertEqual(self.client.upload(path), sha)
        with self.assertRaises(gradsync.GradsyncError) as cm:
            self.client.upload(path + ".missing")
        self.assertEqual(cm.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_a_server_that_is_not_host_port_is_refused_naming_the_form(self):
        for bad in ("", None, "localhost", ":50051", "host:", "host:port", "host:70000"):
            with self.assertRaises(ValueError) as cm:
                gradsync.Client(bad, token="y" * 32)
            self.assertIn("HOST:PORT", str(cm.exception))

    def test_an_unreachable_coordinator_fails_fast(self):
        with gradsync.Client("127.0.0.1:1", token="y" * 32, rpc_timeout=5) as c:
            started = time.monotonic()
            with self.assertRaises(gradsync.RpcError) as cm:
                c.list()
            self.assertLess(time.monotonic() - started, 6)
            self.assertIn(cm.exception.code, (grpc.StatusCode.UNAVAILABLE,
                                              grpc.StatusCode.DEADLINE_EXCEEDED))


def make_certs(dir):
    """deploy/make-dev-certs.sh into dir: a CA and a cluster certificate."""
    subprocess.run(["bash", os.path.join(ROOT, "deploy", "make-dev-certs.sh"), dir],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return dir


class TlsTest(unittest.TestCase):
    """A cluster with mutual TLS (deploy/make-dev-certs.sh): the client with
    the cluster's certificates trains a job; without TLS, or with another
    CA's certificates, it is refused quickly instead of hanging."""

    def test_mutual_tls_works_and_a_client_without_it_is_refused(self):
        if shutil.which("openssl") is None:
            self.skipTest("no openssl to make certificates")
        certs = tempfile.mkdtemp(prefix="gradsync-pyclient-certs.")
        self.addCleanup(shutil.rmtree, certs, True)
        cluster = Cluster(workers=2, tls_dir=make_certs(os.path.join(certs, "ok")))
        self.addCleanup(cluster.stop)
        with gradsync.Client(cluster.server, token_file=cluster.token_file,
                             tls=os.path.join(certs, "ok")) as c:
            c.wait_for_workers(2, timeout=START_TIMEOUT)
            job = c.submit(strategy="allreduce", **TINY)
            self.assertEqual(job.wait(timeout=120), "SUCCEEDED", job.status())
            self.assertEqual(job.results()["steps"], 16)
        for tls in (None, make_certs(os.path.join(certs, "other"))):
            with gradsync.Client(cluster.server, token_file=cluster.token_file, tls=tls,
                                 rpc_timeout=5) as c:
                started = time.monotonic()
                with self.assertRaises(gradsync.RpcError) as cm:
                    c.list()
                self.assertLess(time.monotonic() - started, 6, tls)
                self.assertIn(cm.exception.code, (grpc.StatusCode.UNAVAILABLE,
                                                  grpc.StatusCode.DEADLINE_EXCEEDED), tls)


class FrozenCoordinatorTest(unittest.TestCase):
    """A coordinator that stops answering (SIGSTOP) ends a watch without a
    timeout (keepalive) and every unary call (its deadline): no hang."""

    def test_watch_and_calls_fail_instead_of_hanging(self):
        cluster = Cluster(workers=0)
        self.addCleanup(cluster.stop)
        c = gradsync.Client(cluster.server, token_file=cluster.token_file, rpc_timeout=2)
        self.addCleanup(c.close)
        job = c.submit(**TINY)   # no workers: it stays QUEUED
        self.assertEqual(job.status()["state"], "QUEUED")
        self.assertIn("needs 2 workers", job.status().get("waiting_for", ""))
        outcome = {}

        def watch():
            try:
                for _ in job.watch():
                    pass
                outcome["ended"] = "without an error"
            except gradsync.GradsyncError as e:
                outcome["error"] = e
            outcome["at"] = time.monotonic()

        t = threading.Thread(target=watch, daemon=True)
        t.start()
        time.sleep(0.5)
        frozen_at = time.monotonic()
        cluster.signal_server(signal.SIGSTOP)
        started = time.monotonic()
        with self.assertRaises(gradsync.RpcError) as cm:
            c.list()
        self.assertEqual(cm.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertLess(time.monotonic() - started, 5)
        t.join(timeout=40)
        self.assertFalse(t.is_alive(), "the watch still hangs 40 s after the freeze")
        self.assertIn("error", outcome, outcome)
        self.assertEqual(outcome["error"].code, grpc.StatusCode.UNAVAILABLE, outcome)
        self.assertLess(outcome["at"] - frozen_at, 30)
        cluster.signal_server(signal.SIGCONT)


def main():
    global gradsync, grpc
    reason = skip_reason()
    if reason:
        print("SKIPPED: " + reason)
        return SKIP_CODE
    for binary in ("gradsync-server", "gradsync-worker"):
        if not os.access(os.path.join(BIN_DIR, binary), os.X_OK):
            print("test_client: FAIL: %s/%s not built (GRADSYNC_BIN_DIR)" % (BIN_DIR, binary))
            return 1
    import grpc as grpc_module
    try:
        import gradsync as gradsync_module
    except ImportError as e:   # StubsNotFound: the build has not made them
        print("test_client: FAIL: %s" % e)
        return 1
    grpc, gradsync = grpc_module, gradsync_module
    # CTest's timeout and Ctrl-C: unwind, so that every daemon is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        result = unittest.main(argv=sys.argv, exit=False).result
    finally:
        for c in CLUSTERS:
            c.stop()
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
