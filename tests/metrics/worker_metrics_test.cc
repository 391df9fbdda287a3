// The worker's metrics decorators: MeteredTransport under real allreduces
// (bytes per peer agree between sender and receiver, results unchanged) and
// MeteredSync around a fake GradientSync (one latency observation per
// bucket, PS bytes per shard from the job's layout); WorkerMetrics' step
// accounting from progress reports.
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "worker/collectives/allreduce_factory.h"
#include "worker/collectives/testing/transport_group.h"
#include "worker/metrics/metered_sync.h"
#include "worker/metrics/metered_transport.h"
#include "worker/metrics/worker_metrics.h"

namespace gradsync {
namespace {

// One daemon's worth of metrics.
struct Rank {
  MetricsRegistry registry;
  WorkerMetrics metrics{&registry};
};

double PeerBytes(CounterFamily* f, int peer) {
  return f->WithLabels({std::to_string(peer)})->value();
}

class MeteredTransportTest : public ::testing::TestWithParam<AllreduceAlgorithm> {};

TEST_P(MeteredTransportTest, WhatEachRankSentItsPeerReceivedAndSumsHold) {
  constexpr int kWorld = 3;
  constexpr size_t kCount = 1000;
  auto group = TransportGroup::Create(TransportKind::kInProc, kWorld);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<Rank> ranks(kWorld);
  std::vector<std::unique_ptr<MeteredTransport>> metered;
  for (int r = 0; r < kWorld; ++r) {
    metered.push_back(std::make_unique<MeteredTransport>(
        (*group)->transport(r), ranks[r].metrics.peer_sent_bytes,
        ranks[r].metrics.peer_received_bytes));
  }
  std::vector<std::thread> threads;
  std::vector<absl::Status> status(kWorld);
  std::vector<std::vector<float>> data(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    data[r].assign(kCount, static_cast<float>(r + 1));
    threads.emplace_back([&, r] {
      auto algo = MakeAllreduce(GetParam(), metered[r].get(), kCount, {});
      status[r] = algo.ok() ? (*algo)->Run(data[r].data(), 0, 0) : algo.status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    EXPECT_EQ(data[r][kCount - 1], 6.0f);  // 1 + 2 + 3
  }
  double total = 0;
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_FALSE(
        absl::StrContains(ranks[r].registry.Render(), absl::StrCat("{peer=\"", r, "\"}")))
        << "rank " << r << " lists itself as a peer";
    for (int p = 0; p < kWorld; ++p) {
      if (p == r) continue;
      EXPECT_EQ(PeerBytes(ranks[r].metrics.peer_sent_bytes, p),
                PeerBytes(ranks[p].metrics.peer_received_bytes, r))
          << r << " -> " << p;
      total += PeerBytes(ranks[r].metrics.peer_sent_bytes, p);
    }
  }
  EXPECT_GT(total, 0);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, MeteredTransportTest,
                         ::testing::Values(AllreduceAlgorithm::kRing,
                                           AllreduceAlgorithm::kHalvingDoubling));

// Records calls; succeeds unless told to fail.
class FakeSync final : public GradientSync {
 public:
  absl::Status Initialize(const std::vector<Range>&, float*) override {
    return absl::OkStatus();
  }
  absl::Status SyncBucket(int64_t, int, float*, float*) override {
    ++calls;
    return fail ? absl::UnavailableError("peer gone") : absl::OkStatus();
  }
  absl::Status Finish(float*) override { return absl::OkStatus(); }
  void Abort(const absl::Status&) override {}
  Output output() const override { return Output::kParameters; }
  int pipeline_depth() const override { return 0; }

  int calls = 0;
  bool fail = false;
};

JobOptions PsJob(int rank, int shards, SyncMode mode) {
  JobOptions job;
  job.rank = rank;
  job.strategy = SyncStrategy::kPs;
  job.mode = mode;
  for (int s = 0; s < shards; ++s) {
    job.ps_shards.push_back({"", 400});  // 100 floats
  }
  return job;
}

TEST(MeteredSync, PsBytesPerShardFollowTheLayout) {
  Rank rank;
  const JobOptions a = PsJob(0, 2, SyncMode::kAsync);
  auto fake = std::make_unique<FakeSync>();
  MeteredSync sync(std::move(fake), &a, &rank.metrics);
  // Bucket 0: 250 floats = partitions of 84, 83, 83 on shards 0, 1, 0;
  // bucket 1: 50 floats = one partition, the job's 4th, on shard 1.
  const std::vector<Range> buckets = {{0, 250}, {250, 50}};
  std::vector<float> params(300), grad(300);
  ASSERT_TRUE(sync.Initialize(buckets, params.data()).ok());
  ASSERT_TRUE(sync.SyncBucket(0, 0, grad.data(), params.data()).ok());
  ASSERT_TRUE(sync.SyncBucket(0, 1, grad.data(), params.data()).ok());
  ASSERT_TRUE(sync.Finish(params.data()).ok());
  CounterFamily* sent = rank.metrics.ps_sent_bytes;
  CounterFamily* received = rank.metrics.ps_received_bytes;
  // Rank 0: Init sends all (shard 0: 167 floats, shard 1: 133), then one
  // step of each bucket.
  EXPECT_EQ(PeerBytes(sent, 0), 4 * (167 + 167));
  EXPECT_EQ(PeerBytes(sent, 1), 4 * (133 + 133));
  // Initial pull, the step, and async's final pull.
  EXPECT_EQ(PeerBytes(received, 0), 4 * 3 * 167);
  EXPECT_EQ(PeerBytes(received, 1), 4 * 3 * 133);
  EXPECT_EQ(rank.metrics.push_pull_seconds->Read().count, 2u);
  EXPECT_EQ(rank.metrics.collective_seconds->Read().count, 0u);
}

TEST(MeteredSync, RingCallsAreTimedAndFailuresAreNot) {
  Rank rank;
  JobOptions a;
  a.strategy = SyncStrategy::kAllreduce;
  auto fake = std::make_unique<FakeSync>();
  FakeSync* inner = fake.get();
  MeteredSync sync(std::move(fake), &a, &rank.metrics);
  std::vector<float> v(10);
  ASSERT_TRUE(sync.Initialize({{0, 10}}, v.data()).ok());
  ASSERT_TRUE(sync.SyncBucket(0, 0, v.data(), v.data()).ok());
  inner->fail = true;
  EXPECT_FALSE(sync.SyncBucket(1, 0, v.data(), v.data()).ok());
  EXPECT_EQ(inner->calls, 2);
  EXPECT_EQ(rank.metrics.collective_seconds->Read().count, 1u);
  EXPECT_EQ(rank.metrics.ps_sent_bytes->WithLabels({"0"})->value(), 0);
}

TEST(WorkerMetrics, StepsAccumulateOverJobsFromCumulativeReports) {
  Rank rank;
  for (int64_t step : {0, 5, 12, 20}) rank.metrics.OnProgress(step, 100);
  rank.metrics.OnJobDone(absl::StatusCode::kOk, 0, 0.5);
  EXPECT_EQ(rank.metrics.samples_per_second->value(), 0);  // idle
  for (int64_t step : {0, 3}) rank.metrics.OnProgress(step, 100);
  EXPECT_EQ(rank.metrics.steps->value(), 23);
  EXPECT_EQ(rank.metrics.samples_per_second->value(), 100);
  EXPECT_EQ(rank.metrics.exposed_comm_seconds->value(), 0.5);
  EXPECT_EQ(rank.metrics.jobs->WithLabels({"succeeded"})->value(), 1);
}

}  // namespace
}  // namespace gradsync
