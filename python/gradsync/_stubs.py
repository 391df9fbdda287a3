"""Finds and imports the protobuf and gRPC modules generated from
proto/gradsync/v1/gradsync.proto. They are not in the source tree: the build
writes them (CMake target gradsync_python, python/CMakeLists.txt) as
STUBS/gradsync/v1/gradsync_pb2.py and gradsync_pb2_grpc.py.

STUBS is, the first that holds them:
  1. $GRADSYNC_PY_STUBS
  2. $GRADSYNC_BUILD_DIR/python/gradsync_pb
  3. build/python/gradsync_pb in the checkout this package lies in
     (python/gradsync/ -> ../../build)

The generated modules import each other as `gradsync.v1.<module>` (the
proto's own path), which is this package's name: so STUBS/gradsync is added
to this package's __path__, and `gradsync.v1` is the generated directory.
The proto file keeps the name the C++ code registers it under
(gradsync/v1/gradsync.proto).
"""

import importlib
import os
import sys

_PACKAGE = sys.modules[__package__]
_GENERATED = os.path.join("gradsync", "v1", "gradsync_pb2.py")


class StubsNotFound(ImportError):
    """The generated modules are in none of the places searched."""


def _candidates():
    if os.environ.get("GRADSYNC_PY_STUBS"):
        yield os.environ["GRADSYNC_PY_STUBS"]
    if os.environ.get("GRADSYNC_BUILD_DIR"):
        yield os.path.join(os.environ["GRADSYNC_BUILD_DIR"], "python", "gradsync_pb")
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    yield os.path.join(checkout, "build", "python", "gradsync_pb")


def find():
    """The directory holding gradsync/v1/gradsync_pb2.py; StubsNotFound
    naming every place tried otherwise."""
    tried = []
    for d in _candidates():
        if os.path.isfile(os.path.join(d, _GENERATED)):
            return os.path.abspath(d)
        tried.append(d)
    raise StubsNotFound(
        "gradsync: the generated gRPC modules are not built (looked in %s). Build them "
        "with `cmake --build build --target gradsync_python`, or point GRADSYNC_PY_STUBS "
        "at the directory holding gradsync/v1/gradsync_pb2.py (python/README.md)."
        % ", ".join(tried))


def load():
    """(gradsync_pb2, gradsync_pb2_grpc) from the stubs directory."""
    generated = os.path.join(find(), "gradsync")
    if generated not in _PACKAGE.__path__:
        _PACKAGE.__path__.append(generated)
    pb2 = importlib.import_module(__package__ + ".v1.gradsync_pb2")
    pb2_grpc = importlib.import_module(__package__ + ".v1.gradsync_pb2_grpc")
    return pb2, pb2_grpc
