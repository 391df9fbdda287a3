"""Message-level model of a collective on the emulated hosts, for the
algorithms whose messages do not fall into rounds (bench/experiments/experiment.py).

experiment.py's round model starts each round when the previous one has
ended. The recursive-doubling allreduce (worker/collectives/
recursive_doubling.cc) does not run that way: it cuts the vector into
segments of --chunk-bytes and forwards each one as soon as it is summed,
and a rank with nothing folded into it sends its own segments to its
round-0 partner at once (kSendAhead of them before its first receive). With
N not a power of two that partner is also receiving the fold-in of its
extra rank, so both messages share its downlink, and its sum then goes to
the round-0 partner and, after the last round, back to the extra rank,
sharing its uplink: with one segment (K <= 1 MiB) about 4 K/beta at N = 3
where the rounds say 3 K/beta. With many segments the phases overlap and
the time falls towards what the busiest link carries. Push/pull through PS
shards (worker/sync/ps_client.cc) does not run in rounds either: each
worker keeps a window of partitions in flight and a shard answers a
partition when all its pushes are in, so the last partition's answers
follow its push (pushpull_dag).

simulate() plays such a set of messages out on the hosts' links:
  - every host has an uplink and a downlink (tbf on its egress and on the
    bridge port toward it), each beta bytes/s with a token bucket of
    `burst` payload bytes: a message whose two links both hold tokens
    passes that many bytes at once (as experiment.py's Link does); a link
    with tokens is limited only by the other end, and its bucket drains
    by what it carries above beta; below beta it refills, up to `burst`;
  - messages that are sent at the same time over one link share it
    fairly (max-min, as TCP connections roughly do), a message's rate
    limited by both its sender's uplink and its receiver's downlink;
  - the messages between one pair of ranks leave one after another (one
    stream), in the order they became ready;
  - a message is ready when the nodes it depends on are done, and it is
    done (received) alpha after its last byte left: alpha is the
    per-message latency of the round model, paid once per hop, while the
    segments that follow one another on a stream overlap it;
  - a `proc` node (a rank handling a received segment) is done when its
    dependencies are.
With one segment per message and N a power of two this is experiment.py's
round model, bucket and barrier included. Not modelled: the bytes that
HTTP/2 and TCP buffers hold in flight beyond the mailbox (the real window
is somewhat larger), the mailbox's 32 MiB byte bound (never reached with
1 MiB segments), and more than one connection per peer.
"""

import math

SEND_AHEAD = 4           # worker/collectives/power_of_two.h kSendAhead
SEGMENT_BYTES = 1 << 20  # the bench job's --chunk-bytes default
MAX_SEGMENTS = 64        # larger vectors are simulated in this many segments
# A receiver holds at most this many unconsumed messages from one sender
# (peer_mailboxes.h kMailboxFrames = 16, plus the one being read); the
# sender's next one waits for the receiver to take one.
WINDOW = 17


class Dag:
    """Messages (sender, receiver, bytes) and proc nodes with dependencies
    (indices of earlier or later nodes); build it, then simulate()."""

    def __init__(self):
        self.kind, self.deps, self.msg, self.need = [], [], [], []

    def add_msg(self, src, dst, nbytes):
        self.kind.append("msg")
        self.deps.append([])
        self.msg.append((src, dst, float(nbytes)))
        self.need.append(None)
        return len(self.kind) - 1

    def add_proc(self, need=None):
        """need: done when that many of its dependencies are (the first ones
        to finish, whichever they are); None: all of them."""
        self.kind.append("proc")
        self.deps.append([])
        self.msg.append(None)
        self.need.append(need)
        return len(self.kind) - 1

    def depend(self, node, *on):
        self.deps[node].extend(d for d in on if d is not None)


class _Links:
    """Token buckets of every host's uplink and downlink, kept across runs."""

    def __init__(self, beta, burst):
        self.beta, self.burst = beta, burst
        self.tokens = {}

    def get(self, key):
        return self.tokens.setdefault(key, self.burst)

    def capacity(self, key):
        return math.inf if self.get(key) > 0 else self.beta

    def idle(self, seconds):
        for key in self.tokens:
            self.tokens[key] = min(self.burst, self.tokens[key] + self.beta * seconds)


def _rates(active, links):
    """Max-min fair rates of the active messages ((src, dst) each) on the
    links' present capacities (progressive filling)."""
    users = {}
    for i, (src, dst) in active.items():
        users.setdefault(("up", src), []).append(i)
        users.setdefault(("down", dst), []).append(i)
    left = {key: links.capacity(key) for key in users}
    rate = {}
    while len(rate) < len(active):
        best, share = None, None
        for key, flows in users.items():
            n = sum(1 for i in flows if i not in rate)
            if n and (share is None or left[key] / n < share):
                best, share = key, left[key] / n
        if math.isinf(share):   # both ends have tokens: simulate() sent it
            raise RuntimeError("a message with tokens at both ends is still active")
        for i in users[best]:
            if i in rate:
                continue
            rate[i] = share
            src, dst = active[i]
            for key in (("up", src), ("down", dst)):
                left[key] -= share
    return rate


def simulate(dag, alpha, links, start=0.0):
    """Plays `dag` out from `start` on `links` (_Links, updated); returns the
    time the last node is done."""
    count = len(dag.kind)
    waiting = [len(d) if need is None else need for d, need in zip(dag.deps, dag.need)]
    users = [[] for _ in range(count)]
    for node, deps in enumerate(dag.deps):
        for d in deps:
            users[d].append(node)
    done = [None] * count
    ready_at = [start] * count
    queues = {}        # (src, dst) -> message nodes ready, in order
    remaining = {}     # message node -> bytes left to send
    arrivals = []      # (time, node): last byte left, received alpha later
    end = start
    t = start

    def finish(node, when):
        nonlocal end
        done[node] = when
        end = max(end, when)
        for u in users[node]:
            if waiting[u] <= 0:   # released already (needed fewer than all)
                continue
            ready_at[u] = max(ready_at[u], when)
            waiting[u] -= 1
            if waiting[u] == 0:
                release(u)

    def sent_all(node):   # to rounding
        return remaining[node] <= 1e-9 * max(1.0, dag.msg[node][2])

    def release(node):
        if dag.kind[node] == "proc":
            finish(node, ready_at[node])
        else:
            src, dst, nbytes = dag.msg[node]
            queues.setdefault((src, dst), []).append(node)
            remaining[node] = nbytes

    for node in range(count):
        if waiting[node] == 0 and done[node] is None:
            release(node)
    while True:
        active = {}
        for pair, q in queues.items():
            if q and ready_at[q[0]] <= t:
                active[q[0]] = pair
        pending = [ready_at[q[0]] for q in queues.values() if q and ready_at[q[0]] > t]
        pending += [a for a, _ in arrivals]
        if not active and not pending:
            break
        # What both ends' buckets hold passes at once, in the order the
        # messages became ready.
        sent = []
        for i in sorted(active, key=lambda i: (ready_at[i], i)):
            src, dst = active[i]
            up, down = ("up", src), ("down", dst)
            x = min(remaining[i], links.get(up), links.get(down))
            if x > 0:
                links.tokens[up] -= x
                links.tokens[down] -= x
                remaining[i] -= x
            if sent_all(i):
                sent.append(i)
        if sent:
            for i in sent:
                queues[active[i]].pop(0)
                del remaining[i]
                arrivals.append((t + alpha, i))
            arrivals.sort()
            continue
        rate = _rates(active, links) if active else {}
        step = min(pending) - t if pending else math.inf
        used = {}
        for i, r in rate.items():
            step = min(step, remaining[i] / r)
            src, dst = active[i]
            for key in (("up", src), ("down", dst)):
                used[key] = used.get(key, 0.0) + r
        for key, u in used.items():
            tokens = links.get(key)
            if tokens > 0 and u > links.beta:
                step = min(step, tokens / (u - links.beta))
        step = max(step, 0.0)
        for key in list(links.tokens):
            u = used.get(key, 0.0)
            links.tokens[key] = min(links.burst,
                                    max(0.0, links.tokens[key] + (links.beta - u) * step))
            if links.tokens[key] < 1e-9:
                links.tokens[key] = 0.0
        t += step
        for i, r in rate.items():
            remaining[i] -= r * step
            if sent_all(i):
                queues[active[i]].pop(0)
                del remaining[i]
                arrivals.append((t + alpha, i))
        arrivals.sort()
        while arrivals and arrivals[0][0] <= t + 1e-15:
            when, node = arrivals.pop(0)
            finish(node, when)
    stuck = sum(1 for d in done if d is None)
    if stuck:
        raise RuntimeError("%d of %d nodes never became ready: a dependency cycle"
                           % (stuck, count))
    return end


def segments(k, seg=SEGMENT_BYTES):
    """The byte sizes of K bytes cut into segments of at most `seg`, or into
    MAX_SEGMENTS equal ones where that would be more (tree_dag then counts
    its send-ahead and mailbox in bytes, so only the pipeline's fill, one
    segment, grows)."""
    n = max(1, -(-int(k) // seg))
    n = min(n, MAX_SEGMENTS)
    return [k / n] * n


def tree_dag(n, k, seg=SEGMENT_BYTES, window=WINDOW):
    """Recursive doubling of K bytes over N ranks, one per host, as
    recursive_doubling.cc runs it (see the module text)."""
    p = 1 << int(math.log2(n))
    levels = int(math.log2(p))
    extra = n - p
    sizes = segments(k, seg)
    s = len(sizes)
    # Coarser segments than the code's (above MAX_SEGMENTS): the send-ahead
    # and the mailbox hold as many bytes as the code's would.
    scale = seg / sizes[0] if sizes[0] > seg else 1.0
    ahead = max(1, int(round(SEND_AHEAD * scale)))
    window = max(1, int(round(window * scale)))

    def real(v):
        return 2 * v if v < extra else v + extra
    dag = Dag()
    # Messages: round j, from virtual v, segment t; fold-in and fold-out.
    rnd = [[[dag.add_msg(real(v), real(v ^ (1 << j)), sizes[t]) for t in range(s)]
            for v in range(p)] for j in range(levels)]
    fold_in = [[dag.add_msg(2 * v + 1, 2 * v, sizes[t]) for t in range(s)]
               for v in range(extra)]
    fold_out = [[dag.add_msg(2 * v, 2 * v + 1, sizes[t]) for t in range(s)]
                for v in range(extra)]
    for v in range(p):
        folded = v < extra
        prev = None
        fold_procs = []
        if folded:
            for t in range(s):   # FoldIn: sum each segment, send it on
                proc = dag.add_proc()
                dag.depend(proc, fold_in[v][t], prev)
                dag.depend(rnd[0][v][t], proc)
                fold_procs.append(proc)
                prev = proc
        procs = []
        for j in range(levels):
            row = []
            for t in range(s):
                proc = dag.add_proc()
                dag.depend(proc, rnd[j][v ^ (1 << j)][t], prev)
                row.append(proc)
                prev = proc
            procs.append(row)
        if not folded:           # round 0: own segments, SEND_AHEAD early
            for t in range(ahead, s):
                dag.depend(rnd[0][v][t], procs[0][t - ahead])
        for j in range(1, levels):
            for t in range(s):
                dag.depend(rnd[j][v][t], procs[j - 1][t])
        if folded:
            for t in range(s):
                dag.depend(fold_out[v][t], procs[levels - 1][t])
        # The mailbox: segment t from each sender waits for t - window taken.
        for j in range(levels):
            for t in range(window, s):
                dag.depend(rnd[j][v ^ (1 << j)][t], procs[j][t - window])
        if folded:
            for t in range(window, s):
                dag.depend(fold_in[v][t], fold_procs[t - window])
    return dag


PS_PARTITION_BYTES = 1 << 20   # the jobs' --ps_partition_bytes default


def pushpull_dag(n, s, k, partition=PS_PARTITION_BYTES):
    """Push/pull of K bytes by N workers (host w) through S shards (on hosts
    0..S-1), as worker/sync/ps_client.cc runs it: P = ceil(K / partition)
    partitions, partition q on shard q % S; each worker sends them in
    StaggeredOrder (groups of S rotated by its rank) with at most
    DefaultPushWindow = 2S + 2 in flight, the next one leaving when any
    answer has come; a shard answers a partition (to every worker) when all
    N pushes of it are in. A push or answer between a worker and the shard
    on its own host crosses no link."""
    p = max(1, -(-int(k) // int(partition)))
    size = k / p
    window = min(p, max(2 * s + 2, s))

    def send(src, dst):
        return dag.add_proc() if src == dst else dag.add_msg(src, dst, size)
    dag = Dag()
    push = [[send(w, q % s) for q in range(p)] for w in range(n)]
    pull = [[send(q % s, w) for q in range(p)] for w in range(n)]
    for q in range(p):
        reduced = dag.add_proc()
        dag.depend(reduced, *[push[w][q] for w in range(n)])
        for w in range(n):
            dag.depend(pull[w][q], reduced)
    for w in range(n):
        order = list(range(p))
        shift = w % s if s >= 2 else 0
        for begin in range(0, p - s + 1, s):
            group = order[begin:begin + s]
            order[begin:begin + s] = group[shift:] + group[:shift]
        for i in range(window, p):
            answers = dag.add_proc(need=i - window + 1)
            dag.depend(answers, *pull[w])
            dag.depend(push[w][order[i]], answers)
    return dag


def pushpull_seconds(n, s, k, alpha, beta, burst, iterations,
                     partition=PS_PARTITION_BYTES):
    """pushpull_dag timed as the bench times it (see tree_seconds)."""
    return _timed(n, pushpull_dag(n, s, k, partition), alpha, beta, burst, iterations)


def barrier(n, alpha, links):
    """The bench's barrier between runs, a 1-float recursive doubling, in
    rounds as experiment.py simulates it: each round's 4-byte messages take
    their bytes from the buckets, then alpha passes."""
    p = 1 << int(math.log2(n))
    extra = n - p

    def real(v):
        return 2 * v if v < extra else v + extra
    rounds = [[(2 * i + 1, 2 * i) for i in range(extra)]] if extra else []
    rounds += [[(real(v), real(v ^ (1 << j))) for v in range(p)]
               for j in range(int(math.log2(p)))]
    if extra:
        rounds.append([(2 * i, 2 * i + 1) for i in range(extra)])
    for rnd in rounds:
        short = 0.0   # a bucket without 4 bytes: the round waits for them
        for src, dst in rnd:
            for key in (("up", src), ("down", dst)):
                links.tokens[key] = links.get(key) - 4.0
                short = max(short, -links.tokens[key])
        links.idle(short / links.beta + alpha)


def tree_seconds(n, k, alpha, beta, burst, iterations, seg=SEGMENT_BYTES):
    """One recursive-doubling allreduce of K bytes on N hosts, timed as the
    bench times it: runs back to back, each after the barrier, until the
    buckets are left as the run before left them, or `iterations` runs; the
    last run's time. burst = 0: one run."""
    return _timed(n, tree_dag(n, k, seg), alpha, beta, burst, iterations)


def _timed(n, dag, alpha, beta, burst, iterations):
    links = _Links(beta, burst)
    took, state = 0.0, None
    for i in range(iterations if burst > 0 else 1):
        if i:
            barrier(n, alpha, links)
        took = simulate(dag, alpha, links)
        left = sorted((key, round(v, 3)) for key, v in links.tokens.items())
        if left == state:
            break
        state = left
    return took
