// Ring collectives over every transport (threads of this process, and the
// real gRPC transport with one Peer server per rank on loopback), one fixture
// parameterised by transport x world x size, as Gloo's allreduce_test.cc.
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/kernels.h"
#include "common/testing/fake_env.h"
#include "tests/collectives/collective_test_util.h"
#include "worker/collectives/ring.h"
#include "worker/collectives/testing/transport_group.h"
#include "worker/collectives/transport/inproc/inproc_transport.h"

namespace gradsync {
namespace {

std::vector<float> RankData(int rank, size_t n, int run) {
  std::mt19937 rng(1000 * rank + 17 * run + static_cast<int>(n % 9973));
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

using WorldCase = std::tuple<TransportKind, int, size_t>;

// "grpc_world4_n1048579".
std::string WorldCaseName(const ::testing::TestParamInfo<WorldCase>& info) {
  const auto [kind, world, n] = info.param;
  return absl::StrCat(TransportKindName(kind), "_world", world, "_n", n);
}

std::string KindName(const ::testing::TestParamInfo<TransportKind>& info) {
  return TransportKindName(info.param);
}

// ---------------------------------------------------------------- allreduce

class RingAllreduceTest : public ::testing::TestWithParam<WorldCase> {};

TEST_P(RingAllreduceTest, MatchesReferenceEveryRunAndReplicasAreIdentical) {
  const auto [kind, world, n] = GetParam();
  std::unique_ptr<TransportGroup> group = NewGroup(kind, world);
  ASSERT_NE(group, nullptr);
  // Small segments so that multi-segment pipelining is exercised from 34186
  // floats up (1000 floats a segment).
  RingOptions opts;
  opts.segment_bytes = 4 * 1000;
  opts.timeout = absl::Seconds(20);
  std::vector<std::unique_ptr<RingAllreduce>> algos;
  for (int r = 0; r < world; ++r) {
    algos.push_back(std::make_unique<RingAllreduce>(group->transport(r), n, opts));
  }
  // Built once, run many: each run reuses the objects (and, over gRPC, the
  // open streams) with new data.
  constexpr int kRuns = 3;
  for (int run = 0; run < kRuns; ++run) {
    std::vector<std::vector<float>> data(world);
    std::vector<double> want(n, 0.0);
    for (int r = 0; r < world; ++r) {
      data[r] = RankData(r, n, run);
      for (size_t i = 0; i < n; ++i) want[i] += data[r][i];
    }
    auto st = OnRanks(AllRanks(world), [&](int r) {
      return algos[r]->Run(data[r].data(), /*step=*/run, /*bucket=*/0);
    });
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(st[r].ok()) << "rank " << r << " run " << run << ": " << st[r];
    }
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(data[0][i], want[i], 1e-5 * world) << "run " << run << " element " << i;
    }
    const uint64_t sum0 = Checksum(data[0].data(), n);
    for (int r = 1; r < world; ++r) {
      EXPECT_EQ(Checksum(data[r].data(), n), sum0) << "run " << run << " rank " << r;
    }
  }
}

// Every world and size on every transport: the executable runs in about 10 s
// on 2 cores (ctest -j2: about 17 s, loaded), gRPC world 8 x 2^20+3 being the
// slowest case at about 2 s, so nothing needs leaving out.
INSTANTIATE_TEST_SUITE_P(Transports, RingAllreduceTest,
                         ::testing::Combine(::testing::ValuesIn(kTransports),
                                            ::testing::Values(1, 2, 3, 4, 5, 8),
                                            ::testing::Values(size_t{1}, size_t{7},
                                                              size_t{1000}, size_t{34186},
                                                              size_t{(1 << 20) + 3})),
                         WorldCaseName);

// ---------------------------------------------------------------- failures

class RingFailureTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(RingFailureTest, AllreduceTimesOutWhenAPeerNeverShowsUp) {
  std::unique_ptr<TransportGroup> group = NewGroup(GetParam(), 3);
  ASSERT_NE(group, nullptr);
  RingOptions opts;
  opts.timeout = absl::Milliseconds(200);
  RingAllreduce algo(group->transport(0), 100, opts);
  std::vector<float> data(100, 1.0f);
  const absl::Time start = absl::Now();
  absl::Status st = algo.Run(data.data(), 0, 0);
  EXPECT_TRUE(absl::IsDeadlineExceeded(st)) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// The deadline is on the Env's clock: with a fake one, a Run whose peers
// never come fails once the test has moved the clock past options.timeout
// (an hour: on the real clock this test would time out), and not before.
TEST(RingTimeout, DeadlineIsOnTheEnvsClock) {
  FakeEnv env;
  InProcGroup group(3, WireDtype::kFp32, &env);
  RingOptions opts;
  opts.timeout = absl::Hours(1);
  opts.env = &env;
  RingAllreduce algo(group.transport(0), 100, opts);
  std::vector<float> data(100, 1.0f);
  absl::Mutex mu;
  bool done = false;
  absl::Status st;
  std::thread runner([&] {
    absl::Status s = algo.Run(data.data(), 0, 0);
    absl::MutexLock lock(&mu);
    st = s;
    done = true;
  });
  // Run reads its deadline when it starts, which the test cannot see: move
  // the clock 10 minutes at a time, giving Run real time to notice each.
  absl::Duration advanced;
  while (true) {
    absl::MutexLock lock(&mu);
    if (mu.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(20))) {
      break;
    }
    env.Advance(absl::Minutes(10));
    advanced += absl::Minutes(10);
  }
  runner.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(st)) << st;
  EXPECT_GE(advanced, opts.timeout) << "failed before its fake deadline";
}

// Abort from another thread is the Transport contract for every transport.
// (The in-process group also shares one abort between all its ranks; a gRPC
// rank only sees a peer's abort as a broken stream, so that is not tested
// here.)
TEST_P(RingFailureTest, AbortFromAnotherThreadUnblocksAWaitingRank) {
  std::unique_ptr<TransportGroup> group = NewGroup(GetParam(), 2);
  ASSERT_NE(group, nullptr);
  RingAllreduce algo(group->transport(0), 100);  // default 30 s timeout
  std::vector<float> data(100, 1.0f);
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(100));
    group->transport(0)->Abort(absl::CancelledError("test abort"));
  });
  const absl::Time start = absl::Now();
  absl::Status st = algo.Run(data.data(), 0, 0);
  aborter.join();
  EXPECT_TRUE(absl::IsCancelled(st)) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_P(RingFailureTest, StrayChunkIsRejectedNotSummed) {
  std::unique_ptr<TransportGroup> group = NewGroup(GetParam(), 2);
  ASSERT_NE(group, nullptr);
  // Rank 1 sends a chunk tagged for step 7 while rank 0 runs step 0 and
  // expects (step 0, reduce-scatter, index 0) of its elements [50, 100).
  std::vector<float> junk(50, 100.0f);
  const ChunkTag stray{/*step=*/7, /*bucket=*/0, CollectivePhase::kReduceScatter,
                       /*index=*/0, /*segment=*/0};
  ASSERT_TRUE(group->transport(1)->Send(0, stray, junk.data(), 50).ok());
  RingAllreduce algo(group->transport(0), 100);
  std::vector<float> data(100, 1.0f);
  absl::Status st = algo.Run(data.data(), 0, 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("step 7"), absl::string_view::npos) << st;
  for (size_t i = 0; i < 100; ++i) {
    EXPECT_EQ(data[i], 1.0f) << "element " << i << " summed";
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, RingFailureTest, ::testing::ValuesIn(kTransports),
                         KindName);

TEST(CollectivePhase, ChunkTagPrintsThePhaseByName) {
  ChunkTag tag{3, 1, CollectivePhase::kAllgather, 2, 0};
  EXPECT_EQ(tag.ToString(), "(step 3 bucket 1 allgather index 2 segment 0)");
  tag.phase = CollectivePhase::kReduceScatter;
  EXPECT_NE(tag.ToString().find("reduce-scatter"), std::string::npos);
  tag.phase = CollectivePhase::kBroadcast;
  EXPECT_NE(tag.ToString().find("broadcast"), std::string::npos);
  tag.phase = CollectivePhase::kHalving;
  EXPECT_NE(tag.ToString().find("halving"), std::string::npos);
  tag.phase = static_cast<CollectivePhase>(77);  // as a corrupt frame may carry
  EXPECT_NE(tag.ToString().find("phase 77"), std::string::npos);
}

// ---------------------------------------------------------------- broadcast

class RingBroadcastTest : public ::testing::TestWithParam<WorldCase> {};

TEST_P(RingBroadcastTest, EveryRankGetsTheRootsData) {
  // Plain variables, not a structured binding: C++17 lambdas cannot capture
  // those (clang rejects it).
  const TransportKind kind = std::get<0>(GetParam());
  const int world = std::get<1>(GetParam());
  const size_t n = std::get<2>(GetParam());
  for (int root : {0, world - 1}) {
    std::unique_ptr<TransportGroup> group = NewGroup(kind, world);
    ASSERT_NE(group, nullptr);
    std::vector<std::vector<float>> data(world);
    for (int r = 0; r < world; ++r) data[r] = RankData(r, n, 0);
    const std::vector<float> want = data[root];
    auto st = OnRanks(AllRanks(world), [&](int r) {
      return RingBroadcast(group->transport(r), data[r].data(), n, root,
                           /*segment_bytes=*/4000, absl::Now() + absl::Seconds(10));
    });
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(st[r].ok()) << "root " << root << " rank " << r << ": " << st[r];
      EXPECT_EQ(data[r], want) << "root " << root << " rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Transports, RingBroadcastTest,
    ::testing::Combine(::testing::ValuesIn(kTransports), ::testing::Values(1, 2, 3, 5, 8),
                       ::testing::Values(size_t{1}, size_t{7}, size_t{100003})),
    WorldCaseName);

}  // namespace
}  // namespace gradsync
