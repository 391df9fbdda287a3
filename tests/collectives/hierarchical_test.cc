// Hierarchical allreduce and its sub-transport over every transport, by host
// grouping: one group, every rank alone, uneven and interleaved groups.
// (allreduce_algorithms_test.cc runs it through the shared fixture with
// groups of two; this file covers the groupings and the group failures.)
#include <cmath>
#include <cstring>
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
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tests/collectives/collective_test_util.h"
#include "worker/collectives/allreduce_factory.h"
#include "worker/collectives/hierarchical.h"
#include "worker/collectives/sub_transport.h"
#include "worker/collectives/testing/transport_group.h"

namespace gradsync {
namespace {

struct Grouping {
  const char* name;
  std::vector<int> groups;  // a group id per rank
};

void PrintTo(const Grouping& g, std::ostream* os) {
  *os << g.name << " {" << absl::StrJoin(g.groups, ",") << "}";
}

// World size is groups.size().
const Grouping kGroupings[] = {
    {"single", {0}},
    {"pair_split", {0, 1}},
    {"one_group", {5, 5, 5, 5}},
    {"every_rank_alone", {0, 1, 2}},
    {"uneven", {0, 0, 0, 1, 1}},
    {"interleaved", {0, 1, 0, 1}},
    {"ids_out_of_order", {3, 3, 1, 0, 1, 3, 0, 0}},
    {"pairs_and_single", {0, 0, 1, 1, 2, 2, 3}},
};

using HierCase = std::tuple<TransportKind, Grouping, size_t>;

std::string HierCaseName(const ::testing::TestParamInfo<HierCase>& info) {
  return absl::StrCat(TransportKindName(std::get<0>(info.param)), "_",
                      std::get<1>(info.param).name, "_n", std::get<2>(info.param));
}

class HierarchicalTest : public ::testing::TestWithParam<HierCase> {};

TEST_P(HierarchicalTest, SumsAndReplicasAreBitIdenticalEveryRun) {
  const auto [kind, grouping, n] = GetParam();
  const int world = static_cast<int>(grouping.groups.size());
  std::unique_ptr<TransportGroup> group = NewGroup(kind, world);
  ASSERT_NE(group, nullptr);
  AllreduceOptions opts;
  opts.groups = grouping.groups;
  opts.segment_bytes = n < (1 << 16) ? 1000 : 64 << 10;  // several segments
  opts.timeout = absl::Seconds(30);
  std::vector<std::unique_ptr<Allreduce>> algos;
  for (int r = 0; r < world; ++r) {
    auto a =
        MakeAllreduce(AllreduceAlgorithm::kHierarchical, group->transport(r), n, opts);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_EQ((*a)->algorithm(), AllreduceAlgorithm::kHierarchical);
    algos.push_back(std::move(*a));
  }
  // Built once, run twice on the same objects.
  RunAndCheck(algos, n, /*step=*/0, /*bucket=*/1, /*tolerance=*/0, IntegerData);
  RunAndCheck(algos, n, /*step=*/1, /*bucket=*/1, /*tolerance=*/1e-5, InexactData);
}

INSTANTIATE_TEST_SUITE_P(
    Groupings, HierarchicalTest,
    ::testing::Combine(::testing::ValuesIn(kTransports), ::testing::ValuesIn(kGroupings),
                       ::testing::Values(size_t{1}, size_t{7}, size_t{1000})),
    HierCaseName);

// 2^20+3 floats on the groupings whose shapes differ most (one chain of
// four; leaders with chains of different lengths).
INSTANTIATE_TEST_SUITE_P(Large, HierarchicalTest,
                         ::testing::Combine(::testing::ValuesIn(kTransports),
                                            ::testing::Values(kGroupings[2],
                                                              kGroupings[6]),
                                            ::testing::Values(size_t{(1 << 20) + 3})),
                         HierCaseName);

// ---------------------------------------------------------------- options

TEST(HierarchicalOptions, BadGroupsAreInvalidArgumentNamingGroups) {
  std::unique_ptr<TransportGroup> group = NewGroup(TransportKind::kInProc, 3);
  ASSERT_NE(group, nullptr);
  for (const std::vector<int>& bad :
       {std::vector<int>{0, 0}, std::vector<int>{0, 1, 1, 2},
        std::vector<int>{0, -1, 0}}) {
    AllreduceOptions opts;
    opts.groups = bad;
    auto a =
        MakeAllreduce(AllreduceAlgorithm::kHierarchical, group->transport(0), 10, opts);
    EXPECT_TRUE(absl::IsInvalidArgument(a.status()))
        << absl::StrJoin(bad, ",") << ": " << a.status();
    EXPECT_NE(a.status().message().find("groups"), absl::string_view::npos) << a.status();
  }
}

TEST(HierarchicalOptions, HostGroupsOrdersGroupsByLeader) {
  auto h = HostGroups::Make({3, 3, 1, 0, 1, 3, 0, 0}, 8);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->members.size(), 3u);
  EXPECT_EQ(h->members[0], (std::vector<int>{0, 1, 5}));
  EXPECT_EQ(h->members[1], (std::vector<int>{2, 4}));
  EXPECT_EQ(h->members[2], (std::vector<int>{3, 6, 7}));
  EXPECT_EQ(h->Leaders(), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(h->group_of[6], 2);
  auto alone = HostGroups::Make({}, 3);
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(alone->Leaders(), (std::vector<int>{0, 1, 2}));
}

TEST(HierarchicalOptions, GroupsByHostUsesTheHostPartOfEachAddress) {
  EXPECT_EQ(GroupsByHost({"10.0.0.2:7000", "10.0.0.1:7000", "10.0.0.2:7001", "[::1]:9",
                          "10.0.0.1:80", "[::1]:10", "solo"}),
            (std::vector<int>{0, 1, 0, 2, 1, 2, 3}));
  EXPECT_EQ(GroupsByHost({"127.0.0.1:1", "127.0.0.1:2"}), (std::vector<int>{0, 0}));
  EXPECT_TRUE(GroupsByHost({}).empty());
}

// ---------------------------------------------------------------- failures

class HierarchicalFailureTest : public ::testing::TestWithParam<TransportKind> {};

// Groups {0,0,1,1}: a silent member (rank 3, the tail of group 1) and a
// silent leader (rank 2): every other rank gives up at its deadline.
TEST_P(HierarchicalFailureTest, EveryRankTimesOutWhenAPeerNeverShowsUp) {
  for (int silent : {3, 2}) {
    std::unique_ptr<TransportGroup> group = NewGroup(GetParam(), 4);
    ASSERT_NE(group, nullptr);
    AllreduceOptions opts;
    opts.groups = {0, 0, 1, 1};
    opts.timeout = absl::Milliseconds(300);
    std::vector<std::unique_ptr<Allreduce>> algos;
    for (int r = 0; r < 4; ++r) {
      auto a = MakeAllreduce(AllreduceAlgorithm::kHierarchical, group->transport(r), 100,
                             opts);
      ASSERT_TRUE(a.ok()) << a.status();
      algos.push_back(std::move(*a));
    }
    std::vector<std::vector<float>> data(4, std::vector<float>(100, 1.0f));
    std::vector<int> running;
    for (int r = 0; r < 4; ++r) {
      if (r != silent) running.push_back(r);
    }
    const absl::Time start = absl::Now();
    auto st =
        OnRanks(running, [&](int r) { return algos[r]->Run(data[r].data(), 0, 0); });
    for (size_t i = 0; i < st.size(); ++i) {
      EXPECT_TRUE(absl::IsDeadlineExceeded(st[i]))
          << "silent " << silent << " rank " << running[i] << ": " << st[i];
    }
    EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "silent " << silent;
  }
}

TEST_P(HierarchicalFailureTest, AbortFromAnotherThreadUnblocksAWaitingLeader) {
  std::unique_ptr<TransportGroup> group = NewGroup(GetParam(), 3);
  ASSERT_NE(group, nullptr);
  AllreduceOptions opts;  // default 30 s timeout
  opts.groups = {0, 0, 0};
  auto algo =
      MakeAllreduce(AllreduceAlgorithm::kHierarchical, group->transport(0), 100, opts);
  ASSERT_TRUE(algo.ok()) << algo.status();
  ExpectAbortUnblocksRun(algo->get(), group->transport(0), 100);
}

INSTANTIATE_TEST_SUITE_P(Transports, HierarchicalFailureTest,
                         ::testing::ValuesIn(kTransports),
                         [](const ::testing::TestParamInfo<TransportKind>& i) {
                           return TransportKindName(i.param);
                         });

// ---------------------------------------------------------------- sub-transport

TEST(SubTransport, RenumbersRanksAndForwardsToTheirGlobalPeers) {
  std::unique_ptr<TransportGroup> group = NewGroup(TransportKind::kInProc, 4);
  ASSERT_NE(group, nullptr);
  auto a = SubTransport::Create(group->transport(1), {1, 3});
  auto b = SubTransport::Create(group->transport(3), {1, 3});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)->rank(), 0);
  EXPECT_EQ((*b)->rank(), 1);
  EXPECT_EQ((*a)->size(), 2);
  EXPECT_EQ((*b)->GlobalRank(0), 1);
  std::vector<float> sent = {1, 2, 3};
  const ChunkTag tag{5, 0, CollectivePhase::kAllgather, 1, 0};
  ASSERT_TRUE((*a)->Send(1, tag, sent.data(), 3).ok());
  // Global rank 3 sees it from global rank 1.
  auto got = group->transport(3)->Recv(1, tag, 3, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<float> out(3);
  (*got)->CopyTo(out.data());
  EXPECT_EQ(out, sent);
  // And back, received through the sub-transport from sub-rank 1.
  ASSERT_TRUE(group->transport(3)->Send(1, tag, sent.data(), 3).ok());
  auto back = (*a)->Recv(1, tag, 3, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(absl::IsInvalidArgument((*a)->Send(2, tag, sent.data(), 3)));
  EXPECT_TRUE(absl::IsInvalidArgument(
      (*a)->Recv(-1, tag, 3, absl::Now() + absl::Seconds(1)).status()));
}

TEST(SubTransport, RefusesBadRankLists) {
  std::unique_ptr<TransportGroup> group = NewGroup(TransportKind::kInProc, 4);
  ASSERT_NE(group, nullptr);
  Transport* t = group->transport(1);
  for (const std::vector<int>& bad :
       {std::vector<int>{}, std::vector<int>{0, 2}, std::vector<int>{3, 1},
        std::vector<int>{1, 1}, std::vector<int>{1, 4}}) {
    EXPECT_TRUE(absl::IsInvalidArgument(SubTransport::Create(t, bad).status()))
        << absl::StrJoin(bad, ",");
  }
}

}  // namespace
}  // namespace gradsync
