// worker/bench_job: which links a bench job measures (BenchRunner::MeasureLinks)
// over in-process transports, one thread per rank.
#include "worker/bench_job/bench_runner.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/spec/job_spec.h"
#include "worker/collectives/testing/transport_group.h"

namespace gradsync {
namespace {

using Pair = std::array<int, 2>;
constexpr Pair kNone = {-1, -1};

TEST(PickLinkPairs, RanksZeroAndOneAndAPairOfTheOtherKind) {
  const auto pairs = [](const std::vector<int>& groups) {
    const LinkPairs p = PickLinkPairs(groups);
    return std::make_pair(p.between, p.inside);
  };
  using Pairs = std::pair<Pair, Pair>;  // {between, inside}
  EXPECT_EQ(pairs({}), Pairs(kNone, kNone));
  EXPECT_EQ(pairs({0}), Pairs(kNone, kNone));
  EXPECT_EQ(pairs({0, 0}), Pairs(kNone, Pair{0, 1}));  // one host
  EXPECT_EQ(pairs({0, 1}), Pairs(Pair{0, 1}, kNone));  // a host each
  EXPECT_EQ(pairs({0, 0, 0, 0}), Pairs(kNone, Pair{0, 1}));
  EXPECT_EQ(pairs({0, 0, 1, 1}), Pairs(Pair{0, 2}, Pair{0, 1}));
  EXPECT_EQ(pairs({7, 7, 7, 3, 3}), Pairs(Pair{0, 3}, Pair{0, 1}));
  EXPECT_EQ(pairs({5, 5, 2, 5}), Pairs(Pair{0, 2}, Pair{0, 1}));
  EXPECT_EQ(pairs({0, 1, 0, 1}), Pairs(Pair{0, 1}, Pair{0, 2}));
  // Rank 0 alone on its host: rank 1's host, then any host.
  EXPECT_EQ(pairs({0, 1, 1, 1}), Pairs(Pair{0, 1}, Pair{1, 2}));
  EXPECT_EQ(pairs({0, 1, 2, 2}), Pairs(Pair{0, 1}, Pair{2, 3}));
  EXPECT_EQ(pairs({0, 1, 2, 3}), Pairs(Pair{0, 1}, kNone));
}

// Runs ranks `ranks` of a bench job of one 4 KiB ring allreduce over
// `world` in-process ranks with `groups`, messages as `dtype` (the other
// ranks never start); each rank's Run result, by rank (UNKNOWN for ranks
// not run).
std::vector<absl::StatusOr<BenchRankResult>> RunRanks(
    int world, const std::string& groups, const std::vector<int>& ranks,
    int step_timeout_ms, WireDtype dtype = WireDtype::kFp32) {
  std::vector<absl::StatusOr<BenchRankResult>> results(world,
                                                       absl::UnknownError("not run"));
  absl::StatusOr<std::unique_ptr<TransportGroup>> group =
      TransportGroup::Create(TransportKind::kInProc, world,
                             /*connections_per_peer=*/1, dtype);
  EXPECT_TRUE(group.ok()) << group.status();
  if (!group.ok()) return results;
  std::vector<std::thread> threads;
  for (int r : ranks) {
    threads.emplace_back([&, r] {
      JobOptions job;
      job.rank = r;
      job.world_size = world;
      job.is_bench = true;
      job.algorithm = AllreduceAlgorithm::kRing;
      job.chunk_bytes = 1 << 20;
      job.step_timeout = absl::Milliseconds(step_timeout_ms);
      absl::StatusOr<std::vector<int>> parsed = ParseGroups(groups, world);
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      job.groups = *parsed;
      job.bench = {BenchOp::kAllreduce, {4096}, /*iters=*/1, /*warmup=*/0};
      BenchRunner runner(std::move(job), (*group)->transport(r));
      results[r] = runner.Run(nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// Every rank's result of the whole job (each Run must succeed).
std::vector<BenchRankResult> RunBench(int world, const std::string& groups,
                                      WireDtype dtype = WireDtype::kFp32) {
  std::vector<int> all(world);
  for (int r = 0; r < world; ++r) all[r] = r;
  std::vector<absl::StatusOr<BenchRankResult>> results =
      RunRanks(world, groups, all, 20000, dtype);
  std::vector<BenchRankResult> out;
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    if (!results[r].ok()) return {};
    out.push_back(*results[r]);
  }
  return out;
}

// The second pair's rank never answers: ranks 0 and 1 fail with
// DEADLINE_EXCEEDED within the 3 step timeouts the measurement may take.
TEST(BenchRunner, ASilentRankOfTheSecondPairFailsTheOthersInTime) {
  constexpr int kTimeoutMs = 300;
  const absl::Time start = absl::Now();
  std::vector<absl::StatusOr<BenchRankResult>> results =
      RunRanks(3, "0,0,1", {0, 1}, kTimeoutMs);
  const absl::Duration took = absl::Now() - start;
  for (int r : {0, 1}) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kDeadlineExceeded)
        << "rank " << r << ": " << results[r].status();
  }
  EXPECT_LT(took, absl::Milliseconds(3 * kTimeoutMs) + absl::Seconds(5));
}

struct LinksCase {
  int world;
  std::string groups;
  Pair between, inside;  // the pairs measured (kNone: that link is unset)
};

void PrintTo(const LinksCase& c, std::ostream* os) {
  *os << c.world << " ranks, groups " << c.groups;
}

class BenchLinks : public ::testing::TestWithParam<LinksCase> {};

// Each link is reported by its pair's first rank alone, measured by the
// pairs PickLinkPairs names; rank 0 also reports ranks 0 and 1's link as
// alpha_seconds and beta; every rank reports the groups.
TEST_P(BenchLinks, EachPairsFirstRankReportsItsLink) {
  const LinksCase& c = GetParam();
  const std::vector<BenchRankResult> results = RunBench(c.world, c.groups);
  ASSERT_EQ(results.size(), static_cast<size_t>(c.world));
  const BenchRankResult& r0 = results[0];
  const auto check = [&](const Pair& want, const char* what,
                         std::optional<BenchLink> BenchRankResult::*link) {
    SCOPED_TRACE(what);
    for (int r = 0; r < c.world; ++r) {
      const BenchRankResult& x = results[r];
      ASSERT_EQ((x.*link).has_value(), r == want[0]) << "rank " << r;
      if (r != want[0]) continue;
      const BenchLink& l = *(x.*link);
      EXPECT_EQ((Pair{l.rank_a, l.rank_b}), want);
      EXPECT_GT(l.alpha_seconds, 0);
      EXPECT_GT(l.beta_bytes_per_second, 0);
      if (want == Pair{0, 1}) {
        EXPECT_EQ(l.alpha_seconds, r0.alpha_seconds);
        EXPECT_EQ(l.beta_bytes_per_second, r0.beta_bytes_per_second);
      }
    }
  };
  check(c.between, "between", &BenchRankResult::between_hosts);
  check(c.inside, "inside", &BenchRankResult::inside_host);
  EXPECT_EQ(r0.alpha_seconds > 0, c.world > 1);
  for (int r = 0; r < c.world; ++r) {
    SCOPED_TRACE(r);
    const BenchRankResult& x = results[r];
    if (r > 0) {
      EXPECT_EQ(x.alpha_seconds, 0);
    }
    EXPECT_EQ(x.host_groups.size(), static_cast<size_t>(c.world));
    ASSERT_EQ(x.rows.size(), 1u);
    EXPECT_TRUE(x.rows[0].ok) << x.rows[0].error;
  }
}

// A 16-bit wire format carries the tensors only: the links keep float32
// values (fp16 would round any beta above 65504 bytes/s to infinity).
TEST(BenchRunner, LinksKeepTheirValuesOnAHalfPrecisionWire) {
  for (const WireDtype dtype : {WireDtype::kFp16, WireDtype::kBf16}) {
    const std::vector<BenchRankResult> results = RunBench(4, "0,1,1,1", dtype);
    ASSERT_EQ(results.size(), 4u);
    ASSERT_TRUE(results[0].between_hosts.has_value());
    ASSERT_TRUE(results[1].inside_host.has_value());
    for (const BenchLink& l : {*results[0].between_hosts, *results[1].inside_host}) {
      EXPECT_TRUE(std::isfinite(l.beta_bytes_per_second));
      EXPECT_GT(l.beta_bytes_per_second, 65504);  // in-process: GB/s
      EXPECT_GT(l.alpha_seconds, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Groups, BenchLinks,
    ::testing::Values(LinksCase{1, "0", kNone, kNone}, LinksCase{2, "0,0", kNone, {0, 1}},
                      LinksCase{2, "0,1", {0, 1}, kNone},
                      LinksCase{3, "0,0,1", {0, 2}, {0, 1}},
                      LinksCase{4, "0,0,1,1", {0, 2}, {0, 1}},
                      // The second pair is not rank 0's ring neighbour.
                      LinksCase{5, "0,0,0,1,1", {0, 3}, {0, 1}},
                      LinksCase{4, "0,1,0,1", {0, 1}, {0, 2}},
                      // The second pair without rank 0: it sends rank 0 its result.
                      LinksCase{4, "0,1,1,1", {0, 1}, {1, 2}},
                      LinksCase{4, "0,1,2,2", {0, 1}, {2, 3}}),
    [](const ::testing::TestParamInfo<LinksCase>& info) {
      std::string name = "groups_";  // "groups_0_0_1_1"
      for (char ch : info.param.groups) name += ch == ',' ? '_' : ch;
      return name;
    });

}  // namespace
}  // namespace gradsync
