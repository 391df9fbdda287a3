"""The models of bench/experiments/experiment.py: the alpha-beta model of
common/cost_model.h without host groups, the same on tbf's token-bucket
links (the "link model":
the ring (its hops inside a host at their own alpha), hd and hier in
rounds, tree and push/pull message by message
through bench/experiments/flow_model.py), their fit to the ring's points, and where
they put the crossovers. experiment.py's text explains them (its --help,
bench/experiments/gradsync_experiment/__init__.py); this module only computes (no
files, no plots, no processes)."""

import math

import flow_model


class FitError(ValueError):
    """The points cannot give alpha and beta (experiment.py says why and exits)."""


BANDWIDTH_FROM = 1 << 20   # fit beta on ring points of at least this size,
LATENCY_UPTO = 16 << 10    # and alpha on those of at most this size


def weighted_ls(points):
    """(a, c) minimising sum(((t - a*x - c*y) / t)^2) over (x, y, t)."""
    sxx = sxy = syy = sxt = syt = 0.0
    for x, y, t in points:
        w = 1.0 / (t * t)
        sxx += w * x * x
        sxy += w * x * y
        syy += w * y * y
        sxt += w * x * t
        syt += w * y * t
    det = sxx * syy - sxy * sxy
    if det <= 0:
        return None
    return (sxt * syy - syt * sxy) / det, (sxx * syt - sxy * sxt) / det


def ring_rows(rows):
    return [r for r in rows
            if r["algorithm"] == "ring" and r["ok"] and r.get("per_host", 1) == 1]


def fit(rows, burst=0, rate=None):
    """alpha and beta of the ring's model from the one-worker-per-host ring
    rows, on the relative error (each point weighted 1/t^2), in two stages as
    the Hockney model is usually fitted: beta from the bandwidth-bound points
    (K >= 1 MiB), alpha from the latency-bound ones (K <= 16 KiB); without
    points in both ranges, both from all points.
      burst = 0: the closed form t = alpha * 2(N-1) + 2(N-1)/N * K / beta,
    solved exactly: beta with alpha free, then alpha with that beta.
      burst > 0: the ring's token-bucket model (model()), not linear in
    alpha and 1/beta: from the plain fit, beta with alpha fixed, then alpha
    with beta fixed, in turn until neither moves (relative_least_squares).
    Only ring points count: the other algorithms are predictions."""
    pts = [(2.0 * (r["workers"] - 1), 2.0 * (r["workers"] - 1) / r["workers"] * r["bytes"],
            r["time_seconds"], r["bytes"]) for r in ring_rows(rows)]
    big = [p[:3] for p in pts if p[3] >= BANDWIDTH_FROM]
    small = [p[:3] for p in pts if p[3] <= LATENCY_UPTO]
    both = weighted_ls(big) if big and small else None
    if both is None:
        both = weighted_ls([p[:3] for p in pts])
        if both is None:
            raise FitError("need ring results at two or more sizes to fit the model")
        a, c = both
        staged = False
    else:
        c = both[1]
        a = (sum((t - y * c) * x / (t * t) for x, y, t in small) /
             sum(x * x / (t * t) for x, y, t in small))
        staged = True
    if c <= 0:
        raise FitError("the ring's times do not grow with size: no bandwidth to fit")
    if burst <= 0:
        return max(a, 0.0), 1.0 / c
    # With the bucket, beta from the bandwidth-bound points with alpha fixed
    # and alpha from the latency-bound ones with beta fixed, in turn until
    # neither moves (at 1 MiB and more the bucket refills while a message
    # waits alpha, so those points hardly depend on alpha).
    ring = [(r["workers"], r["bytes"], r["time_seconds"]) for r in ring_rows(rows)]
    big = [p for p in ring if p[1] >= BANDWIDTH_FROM] if staged else ring
    small = [p for p in ring if p[1] <= LATENCY_UPTO] if staged else ring
    a = max(a, 1e-7)
    for _ in range(30):
        c0, a0 = c, a
        c = relative_least_squares(
            big, lambda v, p: model("ring", p[0], p[1], a, 1.0 / v, burst=burst, rate=rate), c)
        a = relative_least_squares(
            small, lambda v, p: model("ring", p[0], p[1], v, 1.0 / c, burst=burst, rate=rate), a)
        if abs(c - c0) <= 1e-9 * c and abs(a - a0) <= 1e-9 * a:
            break
    if c <= 0:
        raise FitError("the ring's times do not grow with size: no bandwidth to fit")
    return max(a, 0.0), 1.0 / c


def alpha_per_workers(rows, beta, burst=0, rate=None, start=1e-4):
    """A diagnostic, not the model: alpha fitted separately for each N, from
    that N's one-worker-per-host ring points of at most LATENCY_UPTO, with
    beta fixed (the fitted one). If the points off the model were off only
    because the time per message grows with N (all emulated hosts share one
    machine's CPU), this alpha would bring them in. {N: alpha seconds}."""
    by_n = {}
    for r in ring_rows(rows):
        if r["bytes"] <= LATENCY_UPTO:
            by_n.setdefault(r["workers"], []).append(
                (r["workers"], r["bytes"], r["time_seconds"]))
    return {n: relative_least_squares(
        pts, lambda v, p: model("ring", p[0], p[1], v, beta, burst=burst, rate=rate), start)
        for n, pts in sorted(by_n.items())}


def relative_least_squares(points, f, x, rounds=50):
    """x >= 0 minimising sum((1 - f(x, p) / t)^2) over points p whose last
    item is the measured t, from x: Newton steps on the linearised f (a
    forward difference), halved until the sum falls. f is piecewise linear
    in x here, so this ends in a few rounds; it returns the best x seen."""
    def cost(v):
        return sum((1 - f(v, p) / p[-1]) ** 2 for p in points)
    best = cost(x)
    for _ in range(rounds):
        h = abs(x) * 1e-6 or 1e-12
        base = [f(x, p) for p in points]
        slope = [(f(x + h, p) - m) / h / p[-1] for p, m in zip(points, base)]
        hh = sum(d * d for d in slope)
        if hh <= 0:
            break
        step = sum(d * (1 - m / p[-1]) for d, m, p in zip(slope, base, points)) / hh
        for _ in range(30):
            trial = max(0.0, x + step)
            c = cost(trial)
            if c < best:
                break
            step /= 2
        else:
            break
        done = abs(trial - x) <= 1e-9 * abs(x)
        x, best = trial, c
        if done:
            break
    return x


# The emulated link (bench/experiments/netem-cluster.sh): tbf on each host's egress and
# on the bridge port toward it, a token bucket of `burst` bytes refilled at
# the rate; a packet leaves at once while the bucket holds its bytes and
# waits for tokens otherwise. netem (no bucket) is burst = 0.
DEFAULT_BURST = 73728      # experiment.py run's --burst default (72 KiB)
SEGMENT_BYTES = 1 << 20    # the bench's --chunk-bytes default: hier's chain unit
DEFAULT_RATE = "1gbit"     # and its --rate default
ITERATIONS = 21            # at most this many runs simulated back to back


class Link:
    """One shaped direction of one host's link, in payload bytes: a token
    bucket of `burst` bytes refilled at `beta` bytes/s, FIFO. Sending m bytes
    at t (or when the link is free, if later) takes max(0, m - tokens) /
    beta, tokens = min(burst, tokens left + beta x time since the last send);
    burst = 0 is a plain link (m / beta)."""

    def __init__(self, beta, burst):
        self.beta, self.burst = beta, burst
        self.tokens, self.since, self.free = burst, 0.0, 0.0

    def send(self, t, m):
        start = max(t, self.free)
        tokens = min(self.burst, self.tokens + (start - self.since) * self.beta)
        if m <= tokens:
            self.tokens, self.since = tokens - m, start
        else:
            self.tokens, self.since = 0.0, start + (m - tokens) / self.beta
        self.free = self.since
        return self.free


def payload_burst(burst, rate, beta):
    """The bucket in payload bytes: tbf counts every byte of a packet
    (headers too) at `rate` (bytes/s), and beta is what the payload gets."""
    return burst * min(1.0, beta / rate) if rate else float(burst)


def fold_rounds(n, k, body):
    """Rounds of a power-of-two algorithm over N ranks (power_of_two.h): the
    first 2(N-P) ranks pair up, the odd one of each pair (extra) sends its K
    bytes to the even one (fold-in), the P virtual ranks run `body(P)` (v is
    real rank 2v for v < N-P, v + N-P above), and the even one sends the
    result back (fold-out)."""
    p = 1 << int(math.log2(n))
    extra = n - p

    def real(v):
        return 2 * v if v < extra else v + extra
    rounds = [[(2 * i + 1, 2 * i, k) for i in range(extra)]] if extra else []
    rounds += [[(real(v), real(u), m) for v, u, m in rnd] for rnd in body(p)]
    if extra:
        rounds.append([(2 * i, 2 * i + 1, k) for i in range(extra)])
    return rounds


def schedule(alg, n, k):
    """One allreduce of K bytes on N ranks, one per host, as rounds: lists of
    (sender, receiver, bytes), from worker/collectives/ (blocks of
    PartitionEven differ by at most one float, taken as equal here):
      ring (ring.cc): 2(N-1) rounds, every rank sends one chunk K/N to the
        next (reduce-scatter, then allgather);
      hd (halving_doubling.cc): halving rounds j = 0..L-1, virtual rank v
        sends K/2^(j+1) to v ^ (P >> (j+1)); doubling rounds j = 0..L-1, v
        sends 2^j K/P to v ^ 2^j; with the fold around them;
      tree (recursive_doubling.cc): L rounds of K to v ^ 2^j, with the fold.
    The code pipelines each message in 1 MiB segments and sends some parts
    early (hd's own block, the non-folded ranks' round 0); like
    common/cost_model.h, a round here starts when the previous one ended
    (the link model runs tree's messages as sent instead: flow_model.py)."""
    if alg == "ring":
        return [[(r, (r + 1) % n, k / n) for r in range(n)] for _ in range(2 * (n - 1))]
    if alg == "hd":
        def body(p):
            levels = int(math.log2(p))
            return ([[(v, v ^ (p >> (j + 1)), k / (2 << j)) for v in range(p)]
                     for j in range(levels)] +
                    [[(v, v ^ (1 << j), k * (1 << j) / p) for v in range(p)]
                     for j in range(levels)])
        return fold_rounds(n, k, body)
    if alg == "tree":
        return fold_rounds(n, k, lambda p: [[(v, v ^ (1 << j), k) for v in range(p)]
                                            for j in range(int(math.log2(p)))])
    raise ValueError("no schedule for " + alg)


def pushpull_rounds(n, s, k, partition=None):
    """Push/pull of K bytes through S shards on hosts 0..S-1 (see
    pushpull_model) as (latencies, messages) rounds, each message (sender
    host, receiver host, bytes) of one partition. One partition: the push,
    then the pull. Two or more: the pulls of earlier partitions overlap the
    pushes of later ones, so one round of both that costs two latencies."""
    p = max(1, -(-int(k) // (partition or PARTITION_BYTES)))
    push = [(h, i % s, k / p) for h in range(n) for i in range(p) if i % s != h]
    pull = [(d, h, m) for h, d, m in push]
    return [(1, push), (1, pull)] if p == 1 else [(2, push + pull)]


def shaped_seconds(n, rounds, alpha, beta, burst):
    """Seconds of one run of `rounds` ((latencies, messages) each, messages
    (sender, receiver, bytes)) on hosts whose uplink and downlink are each a
    Link, every round starting when the previous one has ended: a round
    takes latencies x alpha + the time its busiest link needs. With burst = 0
    that is sum(alpha + max bytes on a link / beta), the alpha-beta model.
    With a bucket the state of the buckets matters: the bench times each run
    after a barrier (a 4-byte recursive-doubling allreduce), so this runs
    the rounds back to back, each after that barrier, until the buckets are
    left as the run before left them, or ITERATIONS times (the bench's
    warmup and 20 iterations), and times the last."""
    links = {}

    def run(t, rnds):
        for lat, msgs in rnds:
            end = t
            for src, dst, m in msgs:
                for key in (("up", src), ("down", dst)):
                    link = links.setdefault(key, Link(beta, burst))
                    end = max(end, link.send(t, m))
            t = end + lat * alpha
        return t
    barrier = [(1, r) for r in schedule("tree", n, 4)]
    t = seconds = 0.0
    state = None
    for i in range(ITERATIONS if burst > 0 else 1):
        if i:
            t = run(t, barrier)
        start, t = t, run(t, rounds)
        seconds = t - start
        left = sorted((k, round(link.tokens, 3), round(t - link.since, 12))
                      for k, link in links.items())
        if left == state:
            break
        state = left
    return seconds


def model(alg, n, k, alpha, beta, per_host=1, local=None, burst=0, rate=None,
          partition=None, flow=False, shared=None):
    """Predicted seconds (see the module text). `local`: (alpha, beta) of the
    link between two ranks on one host, for hier's intra-host phases. burst
    (bytes) > 0: the links between hosts are token buckets of that size
    (tbf's --burst) shaped to `rate` bytes/s (payload_burst; None: the
    bucket taken as payload bytes), simulated (shaped_seconds); 0: plain
    alpha-beta, the closed forms below, which the simulation then equals.
    partition: push/pull's largest partition in bytes (None: 4 MiB).
    flow: tree's and push/pull's messages as the code sends them (segment
    by segment; partition by partition through the push window), simulated
    by bench/experiments/flow_model.py instead of in rounds, and the ring with several
    workers per host paying `local`'s alpha on its hops inside a host; the
    link model uses it, the plain alpha-beta model (cost_model.h) does
    not. shared: whether the ranks of `local`'s ping-pong (0 and 1) shared a
    host, from the bench job's host groups; None (results from before
    2026-11-27 lack them): judged by that ping-pong being over twice as fast
    as the link."""
    if alg == "hier":
        hosts = n // per_host
        la, lb = local if local else (alpha, beta)
        # Reduce to the leader and broadcast from it: each a chain over the
        # host's L ranks pipelined by segment (hierarchical.cc), (L - 2 + s)
        # segments' times for s segments of the bench's 1 MiB chunk.
        seg = min(k, SEGMENT_BYTES)
        segments = max(1, math.ceil(k / seg))
        intra = 2 * (per_host - 2 + segments) * (la + seg / lb) if per_host > 1 else 0.0
        return intra + model("ring", hosts, k, alpha, beta, burst=burst,
                             rate=rate) if hosts > 1 else intra
    if shared is None:
        shared = bool(local) and local[1] > 2 * beta
    if flow and alg == "ring" and per_host > 1 and local and shared:
        # L workers per host, ranked host by host (the coordinator's
        # OrderByHost): of a ring's N hops, N/L cross a link and the rest
        # stay on a host. A rank forwards each chunk as soon as it has it
        # (no step barrier), so a rank's last chunk has come 2(N-1) hops
        # that alternate the two kinds: the latency part is 2(N-1) times
        # their mean, not 2(N-1) alpha (exact for L = 2; for larger L the
        # slowest rank's path can hold one more crossing: 4a + 10a_local
        # against 3.5a + 10.5a_local at N = 8, L = 4). Every link still
        # carries one chunk per step, as with one per host. Only when the
        # job's ping-pong (ranks 0 and 1) was inside a host, as host-by-host
        # ranks have it.
        hop = alpha / per_host + local[0] * (per_host - 1) / per_host
        return model("ring", n, k, hop, beta, burst=burst, rate=rate)
    if flow and alg in ("tree", "ps1", "psN"):
        b = payload_burst(burst, rate, beta) if burst > 0 else 0.0
        if alg == "tree":
            return flow_model.tree_seconds(n, k, alpha, beta, b, ITERATIONS)
        return flow_model.pushpull_seconds(n, 1 if alg == "ps1" else n, k, alpha, beta, b,
                                           ITERATIONS, partition or PARTITION_BYTES)
    if burst > 0:
        b = payload_burst(burst, rate, beta)
        if alg in ("ps1", "psN"):
            rounds = pushpull_rounds(n, 1 if alg == "ps1" else n, k, partition)
        else:
            rounds = [(1, r) for r in schedule(alg, n, k)]
        return shaped_seconds(n, rounds, alpha, beta, b)
    p = 1 << int(math.log2(n))
    fold = 2 * (alpha + k / beta) if n != p else 0.0
    if alg == "ring":
        return 2 * (n - 1) * alpha + 2 * (n - 1) / n * k / beta
    if alg == "hd":
        return 2 * math.log2(p) * alpha + 2 * (p - 1) / p * k / beta + fold
    if alg == "tree":
        return math.log2(p) * (alpha + k / beta) + fold
    return pushpull_model(n, 1 if alg == "ps1" else n, k, alpha, beta, partition)


# Rows that do not record their partition size were measured when every job
# used 4 MiB (common/ps_layout.h kPsPartitionBytes); newer rows record theirs.
PARTITION_BYTES = 4 << 20


def pushpull_model(n, s, k, alpha, beta, partition=None):
    """Push K bytes and pull them back through S shards colocated with
    workers 0..S-1, laid out as common/ps_layout.h does (P = ceil(K /
    partition) partitions, partition = the job's ps_partition_bytes, default
    4 MiB, round-robin over the shards). Every byte a host sends (its
    pushes to other hosts' shards, its shard's answers to other hosts) shares
    its uplink, every byte it receives its downlink. With P >= 2 the pushes of
    later partitions overlap the pulls of earlier ones, so the time is the
    busiest link's total; with one partition the pull waits for every push,
    so it is the busiest push link plus the busiest pull link."""
    p = max(1, -(-k // (partition or PARTITION_BYTES)))
    held = [0.0] * n   # bytes of the tensor on host h's shard
    for i in range(p):
        held[i % s] += k / p
    push_out = [k - held[h] for h in range(n)]
    push_in = [(n - 1) * held[h] for h in range(n)]
    # The pull is the push's mirror image (each shard answers what it was
    # pushed), so a phase's busiest link carries max(push_out + push_in).
    if p == 1:
        return 2 * max(push_out + push_in) / beta + 2 * alpha
    load = [push_out[h] + push_in[h] for h in range(n)]  # = up = down per host
    return max(load) / beta + 2 * alpha


def row_model(r, alpha, beta, burst=0, rate=None, flow=False):
    local = (r["job_alpha"], r["job_beta"]) if r["job_alpha"] and r["job_beta"] else None
    return model(r["algorithm"], r["workers"], r["bytes"], alpha, beta,
                 r.get("per_host", 1), local, burst, rate, r.get("ps_partition_bytes"), flow,
                 r.get("job_shared_host"))


def measured_crossover(sizes, ring, other, slack=0.0):
    """(the smallest size at which ring is faster, the size where ring/other
    crosses 1 interpolated on log scales between that size and the one
    before it); (None, None) if ring never wins; the crossover is None when
    ring already wins at the smallest size. slack > 0: "ring faster" is
    "other no longer faster by more than slack", other >= ring * (1 -
    slack), for where the model has the two tie."""
    keep = 1.0 - slack
    for i, k in enumerate(sizes):
        if ring[k] * keep < other[k]:
            if i == 0:
                return k, None
            k0 = sizes[i - 1]
            r0 = math.log(ring[k0] * keep / other[k0])
            r1 = math.log(ring[k] * keep / other[k])
            f = r0 / (r0 - r1) if r0 != r1 else 0.5
            return k, math.exp(math.log(k0) + f * (math.log(k) - math.log(k0)))
    return None, None


def model_crossover(other, ring, lo=256.0, hi=float(1 << 34)):
    """Where the model's order of `other` and `ring` (seconds against bytes)
    changes first, scanning quarter-octave steps from lo to hi and bisecting
    the step where it happens: (bytes, what follows). Ties count: with a
    bucket, two algorithms that send the same bytes can take the same time.
      other faster at lo: where it stops being faster, then "tie" or "ring";
      tie at lo: where the ring becomes faster, then "ring";
      ring faster at lo: (0, "ring"), ring faster at every size;
      no change up to hi: (None, None), never."""
    def order(k):
        o, r = other(k), ring(k)
        return 1 if o < r * (1 - 1e-9) else -1 if r < o * (1 - 1e-9) else 0
    start = order(lo)
    if start < 0:
        return 0.0, "ring"

    def changed(k):
        return order(k) < start
    prev = lo
    for j in range(1, int(4 * math.log2(hi / lo)) + 1):
        k = lo * 2 ** (j / 4)
        if changed(k):
            a, b = prev, k
            for _ in range(50):
                mid = math.sqrt(a * b)
                a, b = (a, mid) if changed(mid) else (mid, b)
            return b, "tie" if order(k) == 0 else "ring"
        prev = k
    return None, None
