// Ring collectives over the in-process transport against a simple reference.
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/kernels.h"
#include "worker/collectives/transport/inproc/inproc_transport.h"
#include "worker/collectives/ring.h"

namespace gradsync {
namespace {

std::vector<float> RankData(int rank, size_t n, int run) {
  std::mt19937 rng(1000 * rank + 17 * run + static_cast<int>(n % 9973));
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Runs `fn(rank)` on `world` threads and returns their statuses.
std::vector<absl::Status> OnAllRanks(int world,
                                     const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> st(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] { st[r] = fn(r); });
  }
  for (auto& t : threads) t.join();
  return st;
}

class RingAllreduceTest
    : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(RingAllreduceTest, MatchesReferenceTwiceAndReplicasAreIdentical) {
  const auto [world, n] = GetParam();
  InProcGroup group(world);
  // Small segments so that multi-segment pipelining is exercised.
  RingOptions opts;
  opts.segment_bytes = 4 * 1000;
  std::vector<std::unique_ptr<RingAllreduce>> algos;
  for (int r = 0; r < world; ++r) {
    algos.push_back(std::make_unique<RingAllreduce>(group.transport(r), n, opts));
  }
  for (int run = 0; run < 2; ++run) {
    std::vector<std::vector<float>> data(world);
    std::vector<double> want(n, 0.0);
    for (int r = 0; r < world; ++r) {
      data[r] = RankData(r, n, run);
      for (size_t i = 0; i < n; ++i) want[i] += data[r][i];
    }
    auto st = OnAllRanks(world, [&](int r) {
      return algos[r]->Run(data[r].data(), /*step=*/run, /*bucket=*/0);
    });
    for (int r = 0; r < world; ++r) ASSERT_TRUE(st[r].ok()) << st[r];
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(data[0][i], want[i], 1e-5 * world) << "element " << i;
    }
    const uint64_t sum0 = Checksum(data[0].data(), n);
    for (int r = 1; r < world; ++r) {
      EXPECT_EQ(Checksum(data[r].data(), n), sum0) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    WorldsAndSizes, RingAllreduceTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8),
                       ::testing::Values(size_t{1}, size_t{7}, size_t{1000},
                                         size_t{(1 << 20) + 3})));

TEST(RingAllreduce, TimesOutWhenAPeerNeverShowsUp) {
  InProcGroup group(3);
  RingOptions opts;
  opts.timeout = absl::Milliseconds(200);
  RingAllreduce algo(group.transport(0), 100, opts);
  std::vector<float> data(100, 1.0f);
  const absl::Time start = absl::Now();
  absl::Status st = algo.Run(data.data(), 0, 0);
  EXPECT_TRUE(absl::IsDeadlineExceeded(st)) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(RingAllreduce, AbortUnblocksAWaitingRank) {
  InProcGroup group(2);
  RingAllreduce algo(group.transport(0), 100);
  std::vector<float> data(100, 1.0f);
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(100));
    group.transport(1)->Abort(absl::CancelledError("test abort"));
  });
  absl::Status st = algo.Run(data.data(), 0, 0);
  aborter.join();
  EXPECT_TRUE(absl::IsCancelled(st)) << st;
}

TEST(RingAllreduce, StrayChunkIsRejectedNotSummed) {
  InProcGroup group(2);
  // Rank 1 sends a message tagged for step 7 while rank 0 runs step 0.
  std::vector<float> junk(50, 100.0f);
  ASSERT_TRUE(group.transport(1)->Send(0, ChunkTag{7, 0, 0, 0, 0}, junk.data(), 50).ok());
  RingAllreduce algo(group.transport(0), 100);
  std::vector<float> data(100, 1.0f);
  absl::Status st = algo.Run(data.data(), 0, 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  for (size_t i = 50; i < 100; ++i) EXPECT_EQ(data[i], 1.0f);  // not summed
}

TEST(RingBroadcast, EveryRankGetsRootsData) {
  for (int world : {1, 2, 3, 5}) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{100003}}) {
      InProcGroup group(world);
      std::vector<std::vector<float>> data(world);
      for (int r = 0; r < world; ++r) data[r] = RankData(r, n, 0);
      auto st = OnAllRanks(world, [&](int r) {
        return RingBroadcast(group.transport(r), data[r].data(), n, 0, 4000,
                             absl::Now() + absl::Seconds(10));
      });
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(st[r].ok()) << st[r];
        EXPECT_EQ(data[r], data[0]) << "world " << world << " n " << n;
      }
    }
  }
}

}  // namespace
}  // namespace gradsync
