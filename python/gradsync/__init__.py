"""gradsync: a Python client for a gradsync cluster (python/README.md).

    import gradsync
    c = gradsync.Client("127.0.0.1:50051", token_file="gradsync-token")
    job = c.submit(strategy="ps", mode="sync", workers=2, epochs=1)
    for ev in job.watch():
        print(ev["kind"], ev.get("step"), ev.get("loss"))
    print(job.wait(), job.results()["test_accuracy"])

Client      a coordinator: submit, resume, job, status, cancel, list, upload,
            wait_for_workers
Job         one job: watch, wait, results, rows, status, cancel
JobOptions  the job's options (the CLI's job flags, with its defaults)
errors      GradsyncError and its kinds (RpcError, SpecError, ConfigError,
            WaitTimeout), each with a grpc.StatusCode `code` and a `message`
pb          the generated protobuf module (gradsync/v1/gradsync.proto)

Needs Debian's python3-grpcio and python3-protobuf (/usr/bin/python3) and the
generated modules, which the build writes (target gradsync_python; where
they are looked for: gradsync/_stubs.py).
"""

import os as _os

# Debian's grpcio 1.51 installs fork handlers that wait for gRPC's thread
# pool to go idle, and can wait forever: a program that starts a subprocess
# while a channel is busy then hangs, printing "Waiting for thread pool to
# idle before forking" every 3 s (grpc/grpc#31885). The client does not use
# gRPC in forked children, so it turns that support off unless the program
# already chose (the variable is read when grpc is first imported).
_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

try:
    import grpc  # noqa: F401 (checked here to say what to install)
    import google.protobuf  # noqa: F401
except ImportError as _e:
    raise ImportError(
        "gradsync needs gRPC and protobuf for Python (%s): apt-get install python3-grpcio "
        "python3-protobuf, and run Debian's /usr/bin/python3" % _e) from None

from ._stubs import StubsNotFound  # noqa: E402,F401
from .client import DEFAULT_SERVER, TERMINAL_STATES, Client, Job, pb  # noqa: E402,F401
from .errors import (  # noqa: E402,F401
    ConfigError, GradsyncError, RpcError, SpecError, WaitTimeout)
from .spec import JobOptions  # noqa: E402,F401

__all__ = ["Client", "Job", "JobOptions", "GradsyncError", "RpcError", "SpecError",
           "ConfigError", "WaitTimeout", "StubsNotFound", "DEFAULT_SERVER",
           "TERMINAL_STATES", "pb"]
