"""The exceptions of the gradsync client.

Every error this package raises is a GradsyncError carrying a gRPC status
code (`code`, a grpc.StatusCode) and a message (`message`), so that one
`except gradsync.GradsyncError as e: e.code` handles them all:

  RpcError     a call that the coordinator refused or that did not complete:
               `message` is the server's text (or gRPC's, e.g. for a
               connection refused), `rpc` the method ("SubmitJob", ...)
  SpecError    a job option refused before any call (an unknown strategy
               name, a wrong type): INVALID_ARGUMENT, also a ValueError
  ConfigError  a bad client setting (token, TLS files): INVALID_ARGUMENT or
               NOT_FOUND, also a ValueError
  WaitTimeout  watch(timeout=) or wait(timeout=) ran out before the job
               ended: DEADLINE_EXCEEDED, also a TimeoutError

Codes follow the servers' (Abseil's) rule: bad spec -> INVALID_ARGUMENT,
missing or wrong token -> UNAUTHENTICATED, unknown job -> NOT_FOUND, dead
or unreachable coordinator -> UNAVAILABLE, time out -> DEADLINE_EXCEEDED.
"""

import grpc

# What each code asks of the caller: str() appends it to the message.
_HINTS = {
    grpc.StatusCode.UNAUTHENTICATED:
        "give the cluster's token: token=, token_file= or $GRADSYNC_TOKEN",
}


class GradsyncError(Exception):
    """Base of every gradsync client error: `code` (grpc.StatusCode),
    `message` (str) and `hint` (what to do about it; may be empty)."""

    def __init__(self, code, message, hint=""):
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.hint = hint or _HINTS.get(code, "")

    def __str__(self):
        return "%s: %s%s" % (self.code.name, self.message,
                             " (%s)" % self.hint if self.hint else "")


class RpcError(GradsyncError):
    """A call to the coordinator ended with a non-OK status. `message` is the
    server's message as it sent it (or gRPC's, when no answer came); `rpc`
    the method name."""

    def __init__(self, code, message, rpc, hint=""):
        super().__init__(code, message, hint)
        self.rpc = rpc

    def __str__(self):
        return "%s: %s" % (self.rpc, super().__str__())


class SpecError(GradsyncError, ValueError):
    """A job option refused by the client itself (INVALID_ARGUMENT)."""

    def __init__(self, message):
        super().__init__(grpc.StatusCode.INVALID_ARGUMENT, message)


class ConfigError(GradsyncError, ValueError):
    """A client setting that cannot be used (token, TLS files)."""


class WaitTimeout(GradsyncError, TimeoutError):
    """The job did not end within the timeout (DEADLINE_EXCEEDED). The job
    goes on running; `job_id` names it."""

    def __init__(self, job_id, timeout):
        super().__init__(grpc.StatusCode.DEADLINE_EXCEEDED,
                         "job %s did not end within %g s" % (job_id, timeout))
        self.job_id = job_id


def from_grpc(error, rpc, server):
    """An RpcError for grpc.RpcError `error` raised by method `rpc` on a call
    to `server`; a connection failure says where it tried."""
    code = error.code() if callable(getattr(error, "code", None)) else None
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    details = error.details() if callable(getattr(error, "details", None)) else None
    hint = ""
    if code == grpc.StatusCode.UNAVAILABLE:
        hint = "coordinator at %s; is gradsync-server running?" % server
    return RpcError(code, details or str(error), rpc, hint)
