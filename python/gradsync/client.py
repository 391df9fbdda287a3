"""Client (one coordinator) and Job (one job on it).

Threading: a Client and its Jobs may be used from several threads at once
(every method is its own gRPC call on one shared channel); a watch()
generator belongs to the thread that iterates it.

Deadlines: every unary call has `rpc_timeout` seconds (default 10); an
upload a minute plus a second per 10 MB. A watch (and wait) runs until the
job ends or its `timeout`; with timeout=None it still never hangs on a dead
or frozen coordinator: the channel pings it every 5 s and the stream fails
UNAVAILABLE when a ping goes 5 s unanswered (the daemons' own keepalive,
common/grpc/grpc_util.h).
"""

import dataclasses
import hashlib
import os
import threading
import time

import grpc

from . import _stubs, report
from . import spec as specs
from .errors import ConfigError, GradsyncError, SpecError, WaitTimeout, from_grpc

pb, pb_grpc = _stubs.load()

DEFAULT_SERVER = "127.0.0.1:50051"
TERMINAL_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")

# common/grpc/security.h: the metadata key of the cluster token, the name
# every cluster certificate carries, the token's length rules.
_TOKEN_KEY = "authorization"
_TLS_NAME = "gradsync"
_MIN_TOKEN, _MAX_TOKEN = 16, 4096
# common/message_limits.h kMaxMessageBytes; common/content_store.h
# kBlobChunkBytes.
_MAX_MESSAGE_BYTES = 48 << 20
_BLOB_CHUNK_BYTES = 1 << 20
# common/grpc/grpc_util.h DefaultChannelArgs: keepalive and reconnection.
_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 5000),
    ("grpc.keepalive_timeout_ms", 5000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]
_WHITESPACE = " \t\n\r\f\v"


def _valid_token(token, source):
    token = token.strip(_WHITESPACE)
    if not _MIN_TOKEN <= len(token) <= _MAX_TOKEN:
        raise ConfigError(grpc.StatusCode.INVALID_ARGUMENT,
                          "%s: the token must have %d to %d characters, it has %d"
                          % (source, _MIN_TOKEN, _MAX_TOKEN, len(token)))
    if any(not "!" <= c <= "~" for c in token):
        raise ConfigError(grpc.StatusCode.INVALID_ARGUMENT,
                          "%s: the token may hold printable ASCII without spaces only" % source)
    return token


def _read(path, what, mode="r"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError as e:
        raise ConfigError(grpc.StatusCode.NOT_FOUND,
                          "%s: cannot read %s (%s)" % (what, path, e.strerror)) from None


def _resolve_token(token, token_file, env_token):
    """The token to send, as the CLI chooses it: `token`, else the file,
    else $GRADSYNC_TOKEN; "" for none."""
    if token is not None and token_file is not None:
        raise ConfigError(grpc.StatusCode.INVALID_ARGUMENT, "give token or token_file, not both")
    if token is not None:
        return _valid_token(token, "token")
    if token_file is not None:
        return _valid_token(_read(token_file, "token_file")[:_MAX_TOKEN + 64],
                            "token_file " + token_file)
    if env_token:
        return _valid_token(env_token, "GRADSYNC_TOKEN")
    return ""


def _tls_files(tls):
    """(ca, cert, key) paths from a directory (ca.pem, cert.pem, key.pem, as
    deploy/make-dev-certs.sh writes them) or a dict with those keys."""
    if isinstance(tls, (str, os.PathLike)):
        return tuple(os.path.join(tls, n + ".pem") for n in ("ca", "cert", "key"))
    if isinstance(tls, dict) and set(tls) == {"ca", "cert", "key"}:
        return tls["ca"], tls["cert"], tls["key"]
    raise ConfigError(grpc.StatusCode.INVALID_ARGUMENT,
                      "tls: a directory holding ca.pem, cert.pem and key.pem, or "
                      "{'ca': PATH, 'cert': PATH, 'key': PATH}; got %r" % (tls,))


def _make_channel(server, tls):
    if tls is None:
        return grpc.insecure_channel(server, options=_CHANNEL_OPTIONS)
    ca, cert, key = (_read(p, "tls", "rb") for p in _tls_files(tls))
    creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                         certificate_chain=cert)
    options = _CHANNEL_OPTIONS + [("grpc.ssl_target_name_override", _TLS_NAME)]
    return grpc.secure_channel(server, creds, options=options)


def _sha256_of(path, what):
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(_BLOB_CHUNK_BYTES), b""):
                h.update(block)
    except OSError as e:
        raise GradsyncError(grpc.StatusCode.NOT_FOUND,
                            "%s: cannot read %s (%s)" % (what, path, e.strerror)) from None
    return h.hexdigest()


class Client:
    """A connection to one gradsync coordinator (`gradsync-server`).

    Client(server="HOST:PORT", token=None, token_file=None, tls=None,
           rpc_timeout=10.0)

    server       the coordinator, as the CLI's --server (default
                 127.0.0.1:50051)
    token        the cluster token; else token_file, a file holding it (as
                 --token_file); else $GRADSYNC_TOKEN; else none (a cluster
                 run with --auth=none). Sent as `authorization: Bearer TOKEN`
                 on every call, as the CLI sends it.
    tls          None (plaintext), or mutual TLS from a directory holding
                 ca.pem, cert.pem and key.pem (deploy/make-dev-certs.sh, the
                 CLI's --tls_dir) or a dict {"ca": PATH, "cert": PATH,
                 "key": PATH} (the CLI's --tls_ca, --tls_cert, --tls_key)
    rpc_timeout  seconds every unary call may take

    Nothing is dialled until the first call. ConfigError for an invalid
    token or an unreadable file. Also a context manager (closes the channel).
    """

    def __init__(self, server=DEFAULT_SERVER, token=None, token_file=None, tls=None,
                 rpc_timeout=10.0):
        host, sep, port = str(server).rpartition(":") if server else ("", "", "")
        unix = str(server).startswith("unix:") and len(str(server)) > 5
        if not unix and (not sep or not host or not port.isdigit()
                         or not 0 < int(port) < 65536):
            raise ValueError("gradsync.Client: server must be HOST:PORT (e.g. %r), got %r"
                             % (DEFAULT_SERVER, server))
        self.server = server
        self.rpc_timeout = float(rpc_timeout)
        tok = _resolve_token(token, token_file, os.environ.get("GRADSYNC_TOKEN"))
        self._metadata = ((_TOKEN_KEY, "Bearer " + tok),) if tok else ()
        self._channel = _make_channel(server, tls)
        self._stub = pb_grpc.CoordinatorStub(self._channel)
        self._mu = threading.Lock()
        self._uploaded = {}  # (kind, path, size, mtime) -> sha256; guarded by _mu

    def __repr__(self):
        return "gradsync.Client(%r)" % self.server

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Closes the channel; calls made afterwards fail."""
        self._channel.close()

    def _call(self, rpc, request, timeout=None):
        try:
            return getattr(self._stub, rpc)(request, metadata=self._metadata,
                                            timeout=timeout or self.rpc_timeout)
        except grpc.RpcError as e:
            raise from_grpc(e, rpc, self.server) from None

    def submit(self, options=None, **fields):
        """Submits a training job; returns its Job (QUEUED or RUNNING).

        submit(strategy="ps", mode="async", staleness=2, workers=4, epochs=1)
        submit(JobOptions(...))  or  submit(opts, epochs=3)  (fields win)

        The keywords are the fields of JobOptions (help(gradsync.JobOptions)),
        the CLI's job flags with its defaults. A model "torchscript:PATH" or
        data "tensors:PATH" is uploaded first (upload()); data
        "tensors-on-workers:PATH" is hashed here. Raises SpecError for an
        option the client refuses, TypeError for an unknown keyword, RpcError
        with the server's INVALID_ARGUMENT naming the field for a spec it
        refuses (e.g. batch_size=0, a model that does not fit the data).
        """
        opts = options if options is not None else specs.JobOptions()
        if not isinstance(opts, specs.JobOptions):
            raise SpecError("options: a gradsync.JobOptions, got %r" % (opts,))
        opts = dataclasses.replace(opts, **fields)
        spec = opts.to_spec(pb)
        self._send_files(spec)
        return self._submit(spec)

    def resume(self, job_id):
        """A new job from the last checkpoint of ended job `job_id`, with its
        spec (the CLI's `submit --resume=ID`); its Job."""
        old = self._call("GetJob", pb.GetJobRequest(id=job_id))
        spec = pb.JobSpec()
        spec.CopyFrom(old.spec)
        spec.resume_from = job_id
        return self._submit(spec)

    def _submit(self, spec):
        job = self._call("SubmitJob", pb.SubmitJobRequest(spec=spec))
        return Job(self, job.id, job)

    def _send_files(self, spec):
        path = specs.local_file(spec.model, specs.TORCHSCRIPT)
        if path is not None:
            spec.model = specs.TORCHSCRIPT + "sha256:" + self.upload(path, "model")
        path = specs.local_file(spec.dataset, specs.TENSORS)
        if path is not None:
            spec.dataset = specs.TENSORS + "sha256:" + self.upload(path, "data")
        path = specs.worker_data_path(spec.dataset)
        if path is not None:
            spec.dataset = "%ssha256:%s:%s" % (specs.WORKER_TENSORS, _sha256_of(path, "data"),
                                               path)

    def upload(self, path, kind="model"):
        """Uploads a file that travels with jobs (Coordinator.PutBlob): kind
        "model" (a TorchScript module) or "data" (a tensors file). Returns its
        SHA-256 (64 hex digits), by which a job names it
        ("torchscript:sha256:HEX"). A file this client uploaded before, unchanged,
        is not sent again. NOT_FOUND when it cannot be read; the server's
        RpcError (e.g. RESOURCE_EXHAUSTED over its --max_blob_bytes)."""
        what = "data" if kind == "data" else "model"
        if kind not in ("model", "data"):
            raise SpecError("kind: 'model' or 'data', got %r" % (kind,))
        try:
            st = os.stat(path)
        except OSError as e:
            raise GradsyncError(grpc.StatusCode.NOT_FOUND, "%s: cannot read %s (%s)"
                                % (what, path, e.strerror)) from None
        key = (kind, os.path.abspath(path), st.st_size, st.st_mtime_ns)
        with self._mu:
            if key in self._uploaded:
                return self._uploaded[key]
        sha = _sha256_of(path, what)
        info = self._call("PutBlob", self._chunks(path, sha, st.st_size, kind),
                          timeout=60 + st.st_size / 10e6)
        if info.sha256 != sha:
            raise GradsyncError(grpc.StatusCode.DATA_LOSS, "%s: the server stored %s as %s, not %s"
                                % (what, path, info.sha256, sha))
        with self._mu:
            self._uploaded[key] = sha
        return sha

    @staticmethod
    def _chunks(path, sha, size, kind):
        """The file in BlobChunks, the first with its hash, size and kind. A
        file that shrinks meanwhile ends early; the server then refuses the
        upload (DATA_LOSS)."""
        with open(path, "rb") as f:
            first = True
            while True:
                data = f.read(_BLOB_CHUNK_BYTES)
                if not data and not first:
                    return
                chunk = pb.BlobChunk(data=data)
                if first:
                    chunk.sha256, chunk.size, chunk.kind = sha, size, kind
                    first = False
                yield chunk

    def job(self, job_id):
        """A Job handle for an existing job id (no call is made)."""
        return Job(self, job_id)

    def status(self, job_id):
        """Job `job_id` as a dict (the results-file keys of docs/user-guide.md,
        plus step, total_steps and stalls); RpcError NOT_FOUND for an unknown
        id."""
        return report.job_to_dict(pb, self._call("GetJob", pb.GetJobRequest(id=job_id)))

    def cancel(self, job_id):
        """Cancels a queued or running job; the job as a dict, as the
        coordinator answered (state CANCELLED, or the state it had ended
        in)."""
        return report.job_to_dict(pb, self._call("CancelJob", pb.CancelJobRequest(id=job_id)))

    def list(self):
        """Jobs and workers, as `gradsync list --json`: {"jobs": [job dicts],
        "workers": [{id, peer_address, state ("idle" or "busy"), job_id,
        num_gpus}], "ps_shards": shards the coordinator can hand out}."""
        resp = self._call("ListJobs", pb.ListJobsRequest())
        return {"jobs": [report.job_to_dict(pb, j) for j in resp.jobs],
                "workers": [report.worker_to_dict(w) for w in resp.workers],
                "ps_shards": resp.ps_shards}

    def wait_for_workers(self, n, timeout=30.0, idle=False):
        """Waits until the coordinator lists at least `n` workers (with
        idle=True: `n` idle ones); returns the workers (list()'s). After
        `timeout` s, GradsyncError DEADLINE_EXCEEDED saying how many there
        were."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                workers = self.list()["workers"]
            except GradsyncError as e:
                if e.code != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                workers = []
            have = [w for w in workers if not idle or w["state"] == "idle"]
            if len(have) >= n:
                return workers
            if time.monotonic() > deadline:
                raise GradsyncError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                    "%d of %d %sworkers after %g s" % (
                                        len(have), n, "idle " if idle else "", timeout))
            time.sleep(0.1)

    def _watch(self, job_id, timeout):
        """WatchJob's events (messages) until the stream ends; see Job.watch."""
        deadline = None if timeout is None else time.monotonic() + timeout
        call = self._stub.WatchJob(pb.WatchJobRequest(id=job_id), metadata=self._metadata,
                                   timeout=timeout)
        try:
            for ev in call:
                yield ev
        except grpc.RpcError as e:
            if (e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and deadline is not None
                    and time.monotonic() >= deadline - 0.1):
                raise WaitTimeout(job_id, timeout) from None
            raise from_grpc(e, "WatchJob", self.server) from None
        finally:
            call.cancel()


class Job:
    """One job on a coordinator: Client.submit, Client.resume and Client.job
    return them. `id` is the job id ("j-1-7"); `state` the last state seen
    (None before any); `last` the last job snapshot seen (a dict, or None).
    """

    def __init__(self, client, job_id, message=None):
        self.client = client
        self.id = job_id
        self._mu = threading.Lock()
        self._message = message  # guarded by _mu: the last Job message seen
        self._progress = []      # guarded by _mu: progress events seen by watch()

    def __repr__(self):
        return "gradsync.Job(%r, state=%s)" % (self.id, self.state)

    def _note(self, message):
        with self._mu:
            self._message = message

    @property
    def state(self):
        with self._mu:
            return None if self._message is None else pb.JobState.Name(self._message.state)

    @property
    def last(self):
        with self._mu:
            return None if self._message is None else report.job_to_dict(pb, self._message)

    def status(self):
        """The job now, as a dict (Client.status)."""
        message = self.client._call("GetJob", pb.GetJobRequest(id=self.id))
        self._note(message)
        return report.job_to_dict(pb, message)

    def cancel(self):
        """Cancels the job (Client.cancel); the job as a dict."""
        message = self.client._call("CancelJob", pb.CancelJobRequest(id=self.id))
        self._note(message)
        return report.job_to_dict(pb, message)

    def watch(self, timeout=None):
        """Yields the job's events as dicts, from its submission on (events
        already past are replayed), until it ends: kind "state", "progress",
        "epoch", "stall" or "straggler" (gradsync.report.event_to_dict lists
        the keys).

        timeout: seconds for the whole watch, None for as long as the job
        runs. WaitTimeout when it runs out (the job goes on); RpcError when
        the stream fails (UNAVAILABLE: the coordinator died or froze).
        Stopping the iteration early (break) ends the stream, not the job.
        """
        for ev in self.client._watch(self.id, timeout):
            d = report.event_to_dict(pb, ev)
            if ev.kind == pb.JobEvent.STATE:
                self._note(ev.job)
            elif ev.kind == pb.JobEvent.PROGRESS:
                with self._mu:
                    self._progress.append(
                        {k: d[k] for k in ("time", "step", "total_steps", "epoch", "loss",
                                           "samples_per_second", "comm_share")})
            yield d

    def wait(self, timeout=None):
        """Waits until the job ends; returns its final state ("SUCCEEDED",
        "FAILED" or "CANCELLED"; the reason of the last two is in
        status()["error"] and ["error_code"]). WaitTimeout after `timeout`
        seconds (None: no limit); the job goes on running."""
        for _ in self.watch(timeout=timeout):
            pass
        return self.status()["state"]

    def results(self):
        """The job as a results-file entry (dict; `gradsync submit --results`
        writes the same keys): test_accuracy, final_train_loss,
        wall_seconds, samples_per_second, comm_seconds, param_checksums,
        per_epoch, ... (docs/user-guide.md "Results format"). Before the job
        ends its results are zeros and `state` says so."""
        return self.status()

    def rows(self, kind="epoch"):
        """Rows for a table (a list of flat dicts, e.g. for
        pandas.DataFrame): kind "epoch", one per epoch of the results
        ({epoch, train_loss, test_accuracy, seconds}); kind "progress", one
        per progress event that watch()/wait() of this Job object saw
        ({time, step, total_steps, epoch, loss, samples_per_second,
        comm_share}; about one per reported step)."""
        if kind == "epoch":
            return self.status()["per_epoch"]
        if kind == "progress":
            with self._mu:
                return [dict(r) for r in self._progress]
        raise SpecError("kind: 'epoch' or 'progress', got %r" % (kind,))
