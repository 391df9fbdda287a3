"""The PS-vs-ring experiment on emulated hosts (issue 8, item 3).

  python3 bench/experiments/experiment.py run  [--workers=2,3,4] [--sizes=4K,64K,1M,16M,64M]
                                   [--algorithms=ring,hd,tree,ps1,psN]
                                   [--rate=1gbit] [--shaper=tbf] [--burst=73728] [--limit=B]
                                   [--iters=3] [--iters-small=20] [--repeats-small=3]
                                   [--hier-hosts=2,3,4] [--hier-per-host=2]
                                   [--ps-partition-bytes=B] [--peer-bulk-bytes=B]
                                   [--ps-reduce-threads=T] [--out=DIR] [--build-dir=build]
                                   [--base=DIR]
  python3 bench/experiments/experiment.py plot [--out=DIR] [--burst=B] [--base=DIR]

`run` (root: network namespaces) brings up 1 + N hosts with
bench/experiments/netem-cluster.sh for each N (coordinator on h0, a worker and a PS
shard on each other host, every link shaped to --rate by --shaper: tbf, or
netem where the kernel has sch_netem (no token bucket, so small messages
are rate-limited too); --burst and --limit are tbf's bucket and queue in
bytes, see bench/experiments/netem-cluster.sh --help), runs `gradsync bench` jobs per
algorithm from h0
(sizes under 1 MiB with --iters-small iterations in --repeats-small jobs
per algorithm, run in rounds that alternate the algorithms, each point the
median job's; the rest with --iters in one job),
tears the hosts down (always). Then, unless --hier-hosts is empty, it brings
up 1 + H hosts with --hier-per-host workers on each (H = each of
--hier-hosts) and runs ring and hier (hierarchical: reduce inside a host,
ring among one leader per host, broadcast inside the host; the groups come
from the workers' shared host addresses) on them. It records its
configuration in DIR/config.json first. Then it does what `plot` does:
collects every row into DIR/experiment.csv and DIR/experiment.json (with
the configuration under "config"), fits the models below to the
one-worker-per-host ring points, reports how many points lie within 15% of
each and why the others do not where that is known, the crossovers (where
the model ends in a tie, also where the two come within 5% of each other), and
a diagnostic (alpha_per_workers: how many one-worker-per-host points an
alpha fitted per N would bring within 15%, against the one alpha), and
draws DIR/*.png with the token-bucket model (plain alpha-beta when
there is no bucket). plot --burst=B: the bucket the model assumes (0: none);
by default the run's configuration's, else run's default, 73728 (older
results do not record it; the output says which it used).

--base=DIR (run and plot): complete this run with an earlier one: every
point (N, workers per host, algorithm, size) that this run did not measure
is taken from DIR (a run directory, or a directory of tables such as
docs/experiment), so a short run can re-measure some points, e.g. only the
small sizes, and be fitted, counted and drawn with the rest. Both runs
must have shaped their links alike (shaper, rate, burst, limit) and say
so in their configuration, else it exits 1 (run checks this before it
sweeps). Each row's `source` names the run that measured it (its date).
The tables record the earlier runs under config.base; the plots draw
their points hollow, and the titles and the report say how many points
came from each run and which runs the fit rests on. A later `plot` of the
same run directory merges with the same DIR again (experiment.json
records it; --base=none draws the run alone).

Algorithms: ring, hd (halving-doubling), tree (recursive doubling): an
allreduce of K bytes on every worker; ps1, psN: push K bytes and pull them
back through 1 or N parameter-server shards (one per host, colocated),
in partitions of at most --ps-partition-bytes (the jobs' ps_partition_bytes,
65536..4194304; default: the job's own, 1 MiB unless a shard could not let
that many pulls wait), which the model follows (the bench's JSON records it
per job; data without it had 4 MiB partitions). --peer-bulk-bytes is the
allreduce jobs' peer_bulk_bytes (gradsync --help; -1: never use the bulk
connections; default: the job's own, 4 MiB). --ps-reduce-threads is every
shard's --ps_reduce_threads (1..64; default: the server's own, 2), recorded
in the configuration.

Two models (computed in bench/experiments/experiment_model.py), each with one alpha
(seconds per message) and one beta (bytes/s) fitted to the ring's points on
the relative error: beta from the points of 1 MiB and more, alpha from
those of 16 KiB and less (fit()).
  - alpha-beta: the formulas of common/cost_model.h without host groups
    (ring: t = a * 2(N-1) + 2(N-1)/N * K/b);
  - alpha-beta+bucket: the emulated link as it is, a tbf token bucket of
    `burst` bytes refilled at the rate on each host's egress and on the
    bridge port toward it. Each algorithm runs round by round with each
    rank's bytes per round from worker/collectives/ (schedule()); a round
    takes alpha plus what its busiest link needs, max(0, m - tokens)/b with
    tokens = min(burst, tokens left + b x time since the link last sent)
    (Link), so a message that fits the bucket costs alpha alone, and a
    link that waits less than burst/b loses nothing. The bench times each
    run after a barrier, so the runs are simulated back to back until the
    buckets settle (shaped_seconds()). With burst = 0 it is the first model.
    Except tree (recursive doubling) and push/pull, whose code does not run
    in rounds: they are simulated message by message as the code sends
    them (bench/experiments/flow_model.py; tree: 1 MiB segments forwarded as they are
    summed, the early round-0 send that shares a folded rank's links, the
    receiver's mailbox of 16 segments; push/pull: each worker's partitions
    in its staggered order through a window of 2S + 2, a shard answering a
    partition when every push of it is in; fair shares of each link), with
    and without the bucket.
The bucket is counted in payload bytes (burst x b / rate: tbf also counts
headers), the rate from the configuration (else 1gbit).

Three lines follow this layout more closely than cost_model.h without
host groups:
  - push/pull with S shards colocated on S of the N worker hosts, push phase
    then pull phase, each bounded by its busiest link: the shard's downlink
    carries (N-1)K/S, a worker's uplink K (S < N) or (N-1)K/N (S = N), so
    t = 2 * max((N-1)/S, 1 or (N-1)/N) * K/b + 2a with one partition, the
    busiest link's total with several (plain alpha-beta; the link model
    plays the partitions out, see above);
  - hier with H hosts of L workers: the inter-host part is the ring over
    the H leaders with the fitted a, b; the two intra-host phases (chains
    over the L ranks pipelined by 1 MiB segment, (L - 2 + s) segment times
    each for s segments) use the bench job's own link inside a host
    (its JSON's inside_host; results from before 2026-11-27: ranks 0 and
    1's, who share a host);
  - the ring with L workers per host (the link model only): ranks go host
    by host (the coordinator's OrderByHost), so N/L of the ring's N hops
    cross a link and the others stay on a host, where a message costs the
    job's own ping-pong alpha; a chunk is forwarded as soon as it arrives,
    so its 2(N-1) hops alternate the two and each round costs their mean,
    a/L + a_local (L-1)/L, with the same bytes per link as one per host.
    Applied when the bench's host groups put ranks 0 and 1 on one host
    (results from before 2026-11-27 have no groups: when their ping-pong
    was over twice as fast as the link).
"""

# The text above is what `python3 bench/experiments/experiment.py --help` prints (cli.py).
# The package, by concern: cli (the flags, main), sweep (run: the emulated
# hosts and the bench jobs), results (the run directory: results in, tables
# out, --base), analysis (the fit, notes, crossovers), report (the text) and
# plots (the PNGs).
USAGE = __doc__
