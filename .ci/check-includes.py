#!/usr/bin/env python3
"""The include rules of CONTRIBUTING.md "Include rules", checked over the tree.

1. Folders have an order; a file includes only from its own folder or a
   folder below it (LAYERS, lowest first).
2. Inside worker/, a module (x.h with x.cc/x.cu beside it) never includes,
   directly or through other modules, a module that includes it: no include
   cycle between modules, so an interface never depends on the
   implementations that depend on it (the factories live in their own
   *_factory files).
3. Below the worker's job entry, generated protobuf/gRPC headers
   (gradsync/v1/...) are included only by the files in PROTO_ALLOWED.

Prints each breach as FILE:LINE: message and exits 1; otherwise one line.
"""
import os
import re
import subprocess
import sys
from collections import defaultdict

# Folders from the bottom up. A file in LAYERS[i] may include headers from
# LAYERS[j] for j <= i (and from outside these folders: Abseil, gRPC, ...).
LAYERS = [
    ["proto", "common"],
    ["worker/collectives"],
    ["worker/collectives/transport"],
    ["worker/collectives/testing"],
    ["worker/model"],
    ["worker/sync"],
    ["worker/metrics"],
    ["worker/train"],
    ["worker/bench_job"],
    ["worker"],
    ["server"],
    ["client"],
    ["tests", "bench"],
]
# The daemons never include each other's code.
FORBIDDEN = [("server", "worker/"), ("worker", "server/"), ("client", "worker/"),
             ("client", "server/")]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE = re.compile(r"\.(h|cc|cu)$")


def layer_of(path):
    best, rank = None, -1
    for i, folders in enumerate(LAYERS):
        for folder in folders:
            if (path == folder or path.startswith(folder + "/")) and \
                    (best is None or len(folder) > len(best)):
                best, rank = folder, i
    return rank


def tracked_sources():
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, text=True, check=True).stdout.split()
    return sorted(p for p in set(out) if SOURCE.search(p) and os.path.isfile(p))


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield n, m.group(1)


def check_layers(files, problems):
    for path in files:
        here = layer_of(path)
        for n, inc in includes(path):
            for src, bad in FORBIDDEN:
                if path.startswith(src + "/") and inc.startswith(bad):
                    problems.append(f"{path}:{n}: {src}/ includes {inc}")
            there = layer_of(inc)
            if there > here >= 0:
                problems.append(f"{path}:{n}: includes {inc}, from a layer above "
                                f"its own ({LAYERS[there]} over {LAYERS[here]})")


def module(path):
    return re.sub(r"\.(h|cc|cu)$", "", path)


def find_cycle(graph):
    """One cycle of the graph as a list of nodes, or None."""
    color, stack = {}, []

    def visit(node):
        color[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if color.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in color:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        color[node] = 2
        return None

    for node in sorted(graph):
        if node not in color:
            found = visit(node)
            if found:
                return found
    return None


def check_cycles(files, problems):
    graph, where = defaultdict(set), {}
    for path in files:
        if not path.startswith("worker/"):
            continue
        for n, inc in includes(path):
            if inc.startswith("worker/") and module(inc) != module(path):
                graph[module(path)].add(module(inc))
                where.setdefault((module(path), module(inc)), f"{path}:{n}")
    while True:
        cycle = find_cycle(graph)
        if not cycle:
            return
        arrows = " -> ".join(cycle)
        problems.append(f"{where[(cycle[0], cycle[1])]}: include cycle: {arrows}")
        graph[cycle[0]].discard(cycle[1])


# Below the worker's job entry only these include generated headers: the
# transports that move frames, the PS client, and the job entry itself.
PROTO_CHECKED = ("worker/collectives/", "worker/sync/", "worker/metrics/", "worker/train/",
                 "worker/model/", "worker/bench_job/", "common/spec/job_options.h")
PROTO_ALLOWED = {
    # The gRPC transport moves TensorFrames: its Peer service (the
    # generated service base), senders, mailboxes and the transport.
    "worker/collectives/transport/grpc/grpc_transport.h",
    "worker/collectives/transport/grpc/grpc_transport.cc",
    "worker/collectives/transport/grpc/peer_mailboxes.h",
    "worker/collectives/transport/grpc/peer_mailboxes.cc",
    "worker/collectives/transport/grpc/peer_sender.h",
    "worker/collectives/transport/grpc/peer_sender.cc",
    "worker/collectives/transport/grpc/peer_service.h",
    "worker/collectives/transport/grpc/peer_service.cc",
    # The PS client: its calls, streams, credentials, the shard configuration
    # it installs, resumption and allreduce checkpoints kept on the shards.
    "worker/sync/ps_client.h",
    "worker/sync/ps_client.cc",
    "worker/sync/ps_stream.h",
    "worker/sync/ps_stream.cc",
    "worker/sync/ps_partition_calls.h",
    "worker/sync/ps_partition_calls.cc",
    "worker/sync/ps_resume.h",
    "worker/sync/ps_resume.cc",
    "worker/sync/allreduce_checkpoint.h",
    "worker/sync/allreduce_checkpoint.cc",
}


def check_proto(files, problems):
    for path in files:
        if not path.startswith(PROTO_CHECKED) or path in PROTO_ALLOWED:
            continue
        for n, inc in includes(path):
            if inc.startswith("gradsync/v1/"):
                problems.append(f"{path}:{n}: includes {inc} below the job entry")


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = tracked_sources()
    problems = []
    check_layers(files, problems)
    check_cycles(files, problems)
    check_proto(files, problems)
    for p in problems:
        print(p)
    if problems:
        print(f"check-includes: {len(problems)} breach(es) of CONTRIBUTING.md "
              f"\"Include rules\"", file=sys.stderr)
        return 1
    print(f"check-includes: OK ({len(files)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
