#!/usr/bin/env python3
"""Checks bench/experiments/flow_model.py, the message-level model of the recursive-
doubling allreduce on emulated links (no network, no root): links are
shared fairly and limited by both ends, a message that fits the bucket
costs alpha alone, a stream sends in order, every node of a schedule is
reached; with one segment and no fold recursive doubling is the round
model, with a fold the early round-0 send shares the folded rank's links,
and with many segments the receiver's mailbox lets the fold-in run ahead."""
import importlib.util
import math
import os
import re
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "flow_model", os.path.join(ROOT, "bench", "experiments", "flow_model.py"))
flow = importlib.util.module_from_spec(spec)
spec.loader.exec_module(flow)

exp_spec = importlib.util.spec_from_file_location(
    "experiment", os.path.join(ROOT, "bench", "experiments", "experiment.py"))
experiment = importlib.util.module_from_spec(exp_spec)
exp_spec.loader.exec_module(experiment)

ALPHA, BETA = 100e-6, 100e6


def constant(path, name):
    """The value of `inline constexpr ... name = V;` in a C++ header."""
    with open(os.path.join(ROOT, path)) as f:
        m = re.search(r"constexpr\s+[\w:]+\s+%s\s*=\s*(?:size_t\{)?(\d+)" % name, f.read())
    return int(m.group(1))


def run(dag, burst=0.0, alpha=ALPHA):
    return flow.simulate(dag, alpha, flow._Links(BETA, burst))


class SimulateTest(unittest.TestCase):
    def test_one_message_takes_alpha_plus_m_over_beta(self):
        dag = flow.Dag()
        dag.add_msg(0, 1, 1e6)
        self.assertAlmostEqual(run(dag), ALPHA + 1e6 / BETA, places=9)

    def test_two_messages_into_one_host_share_its_downlink(self):
        dag = flow.Dag()
        dag.add_msg(1, 0, 1e6)
        dag.add_msg(2, 0, 1e6)
        self.assertAlmostEqual(run(dag), ALPHA + 2e6 / BETA, places=9)

    def test_a_message_is_limited_by_the_slower_end(self):
        # 0 -> 1 shares 0's uplink with 0 -> 2, and 1's downlink with 3 -> 1;
        # all three get half the link until the first two are done.
        dag = flow.Dag()
        dag.add_msg(0, 1, 1e6)
        dag.add_msg(0, 2, 1e6)
        dag.add_msg(3, 1, 1e6)
        self.assertAlmostEqual(run(dag), ALPHA + 2e6 / BETA, places=9)

    def test_shares_are_max_min_fair(self):
        # 2's uplink carries three messages (beta/3 each), so 0 -> 1 gets
        # the rest of 1's downlink, 2 beta/3, not half of it.
        links = flow._Links(BETA, 0)
        rate = flow._rates({"a": (0, 1), "b": (2, 1), "c": (2, 3), "d": (2, 4)}, links)
        self.assertAlmostEqual(rate["a"], 2 * BETA / 3)
        for m in "bcd":
            self.assertAlmostEqual(rate[m], BETA / 3)
        dag = flow.Dag()
        a = dag.add_msg(0, 1, 1e6)
        for dst in (1, 3, 4):
            dag.add_msg(2, dst, 3e6)
        proc = dag.add_proc()
        dag.depend(proc, a)
        flow.simulate(dag, ALPHA, links)
        # (the done time of a proc is its dependencies')
        self.assertGreater(run(dag), 1.5e6 / BETA)

    def test_messages_on_one_stream_leave_in_order(self):
        dag = flow.Dag()
        first = dag.add_msg(0, 1, 1e6)
        dag.add_msg(0, 1, 1e6)
        proc = dag.add_proc()
        dag.depend(proc, first)
        later = dag.add_msg(2, 3, 1e6)
        dag.depend(later, proc)
        # In order, not shared: the first arrives at alpha + m / beta (shared
        # with the second it would be alpha + 2 m / beta), and the message
        # that waits for it ends alpha + m / beta later.
        self.assertAlmostEqual(run(dag), 2 * (ALPHA + 1e6 / BETA), places=9)

    def test_a_dependent_message_waits_for_the_arrival(self):
        dag = flow.Dag()
        a = dag.add_msg(0, 1, 1e6)
        b = dag.add_msg(1, 2, 1e6)
        dag.depend(b, a)
        self.assertAlmostEqual(run(dag), 2 * (ALPHA + 1e6 / BETA), places=9)

    def test_a_message_that_fits_the_bucket_costs_alpha_alone(self):
        dag = flow.Dag()
        dag.add_msg(0, 1, 50e3)
        self.assertLess(run(dag, burst=64e3), ALPHA * 1.01)
        # Larger than the bucket: the rest at beta.
        dag = flow.Dag()
        dag.add_msg(0, 1, 1e6)
        self.assertAlmostEqual(run(dag, burst=64e3), ALPHA + (1e6 - 64e3) / BETA,
                               delta=1e-6)

    def test_a_cycle_is_an_error_not_a_hang(self):
        dag = flow.Dag()
        a = dag.add_msg(0, 1, 1.0)
        b = dag.add_msg(1, 0, 1.0)
        dag.depend(a, b)
        dag.depend(b, a)
        with self.assertRaises(RuntimeError):
            run(dag)


class PushPullTest(unittest.TestCase):
    def test_a_proc_can_need_the_first_of_its_dependencies(self):
        # `after` waits for whichever of fast and slow arrives first: fast,
        # at alpha + 1e5/beta; so it arrives at 2 alpha + 2.1e6/beta, before
        # the 2 alpha + 3e6/beta it would need after slow.
        dag = flow.Dag()
        fast = dag.add_msg(0, 1, 1e5)
        slow = dag.add_msg(2, 3, 1e6)
        first = dag.add_proc(need=1)
        dag.depend(first, slow, fast)
        after = dag.add_msg(4, 5, 2e6)
        dag.depend(after, first)
        self.assertAlmostEqual(run(dag), 2 * ALPHA + 2.1e6 / BETA, places=9)
        # need=2 (both): after slow.
        dag.need[first] = 2
        self.assertAlmostEqual(run(dag), 2 * ALPHA + 3e6 / BETA, places=9)

    def test_one_partition_is_push_then_pull(self):
        # Worker 1 pushes to the shard on host 0, the shard answers: the
        # closed form 2 (alpha + K/beta); worker 0 is on the shard's host.
        k = 1 << 20
        self.assertAlmostEqual(flow.pushpull_seconds(2, 1, k, ALPHA, BETA, 0, 1, k),
                               2 * (ALPHA + k / BETA), places=9)
        for n in (2, 3, 5):
            for s in (1, n):
                self.assertAlmostEqual(
                    flow.pushpull_seconds(n, s, k, ALPHA, BETA, 0, 1, k),
                    experiment.pushpull_model(n, s, k, ALPHA, BETA, k), places=9,
                    msg="N=%d S=%d" % (n, s))

    def test_partitions_overlap_pushes_and_pulls_but_the_last_pull_drains(self):
        # 16 partitions, one shard, 4 workers: the shard's downlink carries
        # 3K of pushes, its uplink 3K of answers; they overlap, and the last
        # partition's answers (3K/16) follow its push.
        k = 16 << 20
        t = flow.pushpull_seconds(4, 1, k, ALPHA, BETA, 0, 1, 1 << 20)
        self.assertGreater(t, 3 * k / BETA * (1 + 1 / 16.0))
        self.assertLess(t, 3 * k / BETA * (1 + 1 / 16.0) * 1.05 + 10 * ALPHA)
        # The round model's busiest-link total leaves the drain out.
        self.assertLess(experiment.pushpull_model(4, 1, k, ALPHA, BETA, 1 << 20), t)

    def test_the_window_holds_pushes_back(self):
        # One shard, 64 partitions: with the window of 2S + 2 = 4 a worker
        # has at most 4 partitions out; unbounded (window >= partitions) its
        # pushes all start at once. Both end near 3K/beta; the window must
        # not deadlock and must not be slower than a few partitions' time.
        k = 64 << 20
        t = flow.pushpull_seconds(4, 1, k, ALPHA, BETA, 0, 1, 1 << 20)
        self.assertLess(t, 3 * k / BETA * 1.1)
        dag = flow.pushpull_dag(4, 1, k, 1 << 20)
        windows = [need for need in dag.need if need is not None]
        self.assertEqual(len(windows), 4 * (64 - 4))      # every push past the window
        self.assertEqual(sorted(set(windows)), list(range(1, 61)))

    def test_push_window_follows_the_code(self):
        with open(os.path.join(ROOT, "worker", "sync", "ps_client.cc")) as f:
            self.assertIn("const size_t fallback = 2 * shards + 2;", f.read())
        with open(os.path.join(ROOT, "common", "ps_layout.h")) as f:
            m = re.search(r"kPreferredPsPartitionBytes = size_t\{(\d+)\} << (\d+);", f.read())
        self.assertEqual(flow.PS_PARTITION_BYTES, int(m.group(1)) << int(m.group(2)))


class TreeTest(unittest.TestCase):
    K = 1 << 20  # one segment

    def test_every_message_and_step_is_reached(self):
        for n in range(2, 9):
            for k in (4, 1 << 20, 5 << 20, 40 << 20):
                dag = flow.tree_dag(n, k)
                end = run(dag)   # raises if a node is never reached
                self.assertGreater(end, 0)
                msgs = [m for m in dag.msg if m]
                p = 1 << int(math.log2(n))
                segs = len(flow.segments(k))
                self.assertEqual(len(msgs), segs * (p * int(math.log2(p)) + 2 * (n - p)))
                self.assertAlmostEqual(sum(m[2] for m in msgs),
                                       k * (p * int(math.log2(p)) + 2 * (n - p)), delta=1e-3 * k)

    def test_powers_of_two_with_one_segment_are_the_round_model(self):
        for n in (2, 4, 8):
            levels = int(math.log2(n))
            self.assertAlmostEqual(flow.tree_seconds(n, self.K, ALPHA, BETA, 0, 1),
                                   levels * (ALPHA + self.K / BETA), places=9)

    def test_a_fold_shares_the_folded_ranks_links(self):
        # N = 3: rank 2 sends early while rank 1's fold-in arrives (2K on
        # rank 0's downlink), then rank 0 sends to both (2K on its uplink):
        # 4 K/beta + 2 alpha, where the rounds say 3 (K/beta + alpha).
        self.assertAlmostEqual(flow.tree_seconds(3, self.K, ALPHA, BETA, 0, 1),
                               4 * self.K / BETA + 2 * ALPHA, places=9)

    def test_the_mailbox_lets_a_long_fold_in_run_ahead(self):
        k = 64 << 20
        t = flow.tree_seconds(3, k, ALPHA, BETA, 0, 1)
        # Once rank 0's mailbox holds WINDOW of rank 2's segments, the fold-in
        # has the downlink to itself: well under 3 K/beta, above 2 K/beta.
        self.assertLess(t, 2.5 * k / BETA)
        self.assertGreater(t, 2 * k / BETA)
        # Without the bound both streams share the downlink to the end.
        unbounded = flow.simulate(flow.tree_dag(3, k, window=1 << 30), ALPHA,
                                  flow._Links(BETA, 0))
        self.assertGreater(unbounded, 2.9 * k / BETA)

    def test_segments_are_capped_and_sum_to_k(self):
        self.assertEqual(flow.segments(3), [3])
        self.assertEqual(len(flow.segments((1 << 20) + 1)), 2)
        big = flow.segments(1 << 30)
        self.assertEqual(len(big), flow.MAX_SEGMENTS)
        self.assertAlmostEqual(sum(big), 1 << 30)

    def test_the_bucket_never_slows_it(self):
        burst = 65e3
        for n in (3, 5, 8):
            for k in (4096, 1 << 16, 1 << 20, 8 << 20):
                plain = flow.tree_seconds(n, k, ALPHA, BETA, 0, 1)
                shaped = flow.tree_seconds(n, k, ALPHA, BETA, burst, 21)
                self.assertLessEqual(shaped, plain * (1 + 1e-9))

    def test_runs_back_to_back_drain_the_bucket(self):
        # The first run finds full buckets; a run that empties them leaves
        # the next one less (the barrier refills little).
        first = flow.tree_seconds(4, 256 << 10, ALPHA, BETA, 65e3, 1)
        settled = flow.tree_seconds(4, 256 << 10, ALPHA, BETA, 65e3, 21)
        self.assertGreater(settled, first * 1.01)

    def test_one_segment_at_powers_of_two_is_the_round_model_with_the_bucket(self):
        # experiment.py's rounds (Link buckets, the barrier between runs,
        # runs until the buckets settle) and the messages agree exactly
        # where recursive doubling does run in rounds.
        for n in (2, 4, 8):
            for k in (4096, 40000, 1 << 16, 200000, 1 << 20):
                for burst in (0, 73728):
                    rounds = experiment.model("tree", n, k, ALPHA, BETA, burst=burst,
                                              rate=125e6)
                    messages = experiment.model("tree", n, k, ALPHA, BETA, burst=burst,
                                                rate=125e6, flow=True)
                    self.assertAlmostEqual(messages / rounds, 1.0, places=9,
                                           msg="N=%d K=%d burst=%d" % (n, k, burst))

    def test_constants_follow_the_code(self):
        self.assertEqual(flow.SEND_AHEAD,
                         constant("worker/collectives/power_of_two.h", "kSendAhead"))
        self.assertEqual(flow.WINDOW, 1 + constant(
            "worker/collectives/transport/grpc/peer_mailboxes.h", "kMailboxFrames"))
        with open(os.path.join(ROOT, "client", "main.cc")) as f:
            m = re.search(r"ABSL_FLAG\(int64_t, chunk_bytes, 1 << (\d+),", f.read())
        self.assertEqual(flow.SEGMENT_BYTES, 1 << int(m.group(1)))

    def test_coarse_segments_keep_the_windows_in_bytes(self):
        # 256 MiB is simulated in 64 segments of 4 MiB; with the send-ahead
        # and the mailbox kept at 4 and 17 MiB it takes what the code's 256
        # segments of 1 MiB take (with 4 and 17 segments of 4 MiB: 10 % more).
        k = 256 << 20
        for n in (3, 5):
            coarse = flow.tree_seconds(n, k, ALPHA, BETA, 0, 1)
            saved = flow.MAX_SEGMENTS
            flow.MAX_SEGMENTS = 1 << 10
            try:
                fine = flow.tree_seconds(n, k, ALPHA, BETA, 0, 1)
            finally:
                flow.MAX_SEGMENTS = saved
            self.assertAlmostEqual(coarse / fine, 1.0, delta=0.02, msg="N=%d" % n)


if __name__ == "__main__":
    unittest.main()
