// worker/bench: which links a bench job measures (BenchRunner::MeasureLink)
// over in-process transports, one thread per rank.
#include "worker/bench/bench_runner.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "worker/collectives/testing/transport_group.h"

namespace gradsync {
namespace {

TEST(CrossHostPeer, TheFirstRankOfAnotherGroupWhenRanksZeroAndOneShareOne) {
  EXPECT_EQ(CrossHostPeer({}), 0);
  EXPECT_EQ(CrossHostPeer({0}), 0);
  EXPECT_EQ(CrossHostPeer({0, 0}), 0);        // one host
  EXPECT_EQ(CrossHostPeer({0, 0, 0, 0}), 0);  // one host
  EXPECT_EQ(CrossHostPeer({0, 1, 0, 1}), 0);  // 0 and 1 already cross
  EXPECT_EQ(CrossHostPeer({0, 0, 1, 1}), 2);
  EXPECT_EQ(CrossHostPeer({7, 7, 7, 3, 3}), 3);
  EXPECT_EQ(CrossHostPeer({5, 5, 2, 5}), 2);
}

// A 4-rank bench job of one 4 KiB ring allreduce with `groups`; rank 0's
// result (every rank's Run must succeed).
v1::BenchRankResult RunBench(const std::string& groups) {
  constexpr int kWorld = 4;
  absl::StatusOr<std::unique_ptr<TransportGroup>> group =
      TransportGroup::Create(TransportKind::kInProc, kWorld);
  EXPECT_TRUE(group.ok()) << group.status();
  if (!group.ok()) return {};
  std::vector<absl::StatusOr<v1::BenchRankResult>> results(
      kWorld, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      v1::Assignment a;
      a.set_rank(r);
      a.set_world_size(kWorld);
      v1::JobSpec* spec = a.mutable_spec();
      spec->set_kind(v1::JOB_KIND_BENCH);
      spec->set_workers(kWorld);
      spec->set_algorithm(v1::ALGORITHM_RING);
      spec->set_chunk_bytes(1 << 20);
      spec->set_step_timeout_ms(20000);
      spec->set_groups(groups);
      spec->mutable_bench()->set_op(v1::BENCH_OP_ALLREDUCE);
      spec->mutable_bench()->add_sizes(4096);
      spec->mutable_bench()->set_iters(1);
      spec->mutable_bench()->set_warmup(0);
      BenchRunner runner(a, (*group)->transport(r));
      results[r] = runner.Run(nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
  }
  if (!results[0].ok()) return {};
  // Every rank got rank 0's broadcast of both links.
  for (int r = 1; r < kWorld; ++r) {
    if (!results[r].ok()) continue;
    EXPECT_EQ(results[r]->alpha_seconds(), results[0]->alpha_seconds()) << r;
    EXPECT_EQ(results[r]->cross_alpha_seconds(),
              results[0]->cross_alpha_seconds())
        << r;
    EXPECT_EQ(results[r]->cross_beta_bytes_per_second(),
              results[0]->cross_beta_bytes_per_second())
        << r;
  }
  return *results[0];
}

std::vector<int> Groups(const v1::BenchRankResult& r) {
  return {r.host_groups().begin(), r.host_groups().end()};
}

TEST(BenchRunner, MeasuresTheLinkToAnotherHostWhenRanksZeroAndOneShareOne) {
  const v1::BenchRankResult r = RunBench("0,0,1,1");
  EXPECT_EQ(r.cross_peer_rank(), 2);
  EXPECT_GT(r.alpha_seconds(), 0);
  EXPECT_GT(r.beta_bytes_per_second(), 0);
  EXPECT_GT(r.cross_alpha_seconds(), 0);
  EXPECT_GT(r.cross_beta_bytes_per_second(), 0);
  EXPECT_EQ(Groups(r), (std::vector<int>{0, 0, 1, 1}));
  ASSERT_EQ(r.rows_size(), 1);
  EXPECT_TRUE(r.rows(0).ok()) << r.rows(0).error();
}

TEST(BenchRunner, MeasuresRanksZeroAndOneOnlyWhenTheyCrossOrShareTheOnlyHost) {
  for (const std::string groups : {"0,1,0,1", "0,0,0,0"}) {
    SCOPED_TRACE(groups);
    const v1::BenchRankResult r = RunBench(groups);
    EXPECT_EQ(r.cross_peer_rank(), 0);
    EXPECT_EQ(r.cross_alpha_seconds(), 0);
    EXPECT_EQ(r.cross_beta_bytes_per_second(), 0);
    EXPECT_GT(r.beta_bytes_per_second(), 0);
    EXPECT_EQ(Groups(r).size(), 4u);
  }
}

}  // namespace
}  // namespace gradsync
