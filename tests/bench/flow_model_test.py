#!/usr/bin/env python3
"""Checks bench/flow_model.py, the message-level model of the recursive-
doubling allreduce on emulated links (no network, no root): links are
shared fairly and limited by both ends, a message that fits the bucket
costs alpha alone, a stream sends in order, every node of a schedule is
reached; with one segment and no fold recursive doubling is the round
model, with a fold the early round-0 send shares the folded rank's links,
and with many segments the receiver's mailbox lets the fold-in run ahead."""
import importlib.util
import math
import os
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "flow_model", os.path.join(ROOT, "bench", "flow_model.py"))
flow = importlib.util.module_from_spec(spec)
spec.loader.exec_module(flow)

ALPHA, BETA = 100e-6, 100e6


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
        a = dag.add_msg(0, 1, 1e6)
        dag.add_msg(0, 2, 1e6)
        dag.add_msg(3, 1, 1e6)
        sim_end = run(dag)
        self.assertAlmostEqual(sim_end, ALPHA + 2e6 / BETA, places=9)
        self.assertGreater(sim_end, ALPHA + 1e6 / BETA)
        del a

    def test_messages_on_one_stream_leave_in_order(self):
        dag = flow.Dag()
        first = dag.add_msg(0, 1, 1e6)
        second = dag.add_msg(0, 1, 1e6)
        proc = dag.add_proc()
        dag.depend(proc, second)
        later = dag.add_msg(1, 0, 1.0)
        dag.depend(later, proc)
        # In order, not shared: the second arrives at alpha + 2 m / beta,
        # alpha after the first (whose alpha it overlaps).
        self.assertAlmostEqual(run(dag), 2 * ALPHA + 2e6 / BETA + 1.0 / BETA, places=9)
        del first

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

    def test_the_bucket_never_slows_it_and_runs_settle(self):
        burst = 65e3
        for n in (3, 5, 8):
            for k in (4096, 1 << 16, 1 << 20, 8 << 20):
                plain = flow.tree_seconds(n, k, ALPHA, BETA, 0, 1)
                shaped = flow.tree_seconds(n, k, ALPHA, BETA, burst, 21)
                self.assertLessEqual(shaped, plain * (1 + 1e-9))


if __name__ == "__main__":
    unittest.main()
