// Data-parallel semantics end to end through the real gRPC data path, in one
// process: N workers x batch b follow the same trajectory as 1 worker x N*b
// (allreduce-sync and ps-sync; the TorchScript models too), ring replicas stay
// bit-identical. The async modes are in async_equivalence_test.cc.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/sync/sync_equivalence_fixture.h"

namespace gradsync {
namespace sync_testing {
namespace {

TEST_F(SyncEquivalence, RingSyncFourWorkersMatchesOneWorkerWithFourTimesTheBatch) {
  auto one = Run("ring", "sync", 1, 64, 25);
  auto four = Run("ring", "sync", 4, 16, 25);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(four.size(), 4u);
  ASSERT_FALSE(one[0].empty());
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(Checksum(four[r].data(), four[r].size()),
              Checksum(four[0].data(), four[0].size()))
        << "ring replicas differ at rank " << r;
  }
  const double err = RelativeError(four[0], one[0]);
  EXPECT_LE(err, 1e-4) << "relative error " << err;
  // The comparison can fail: a different batch split gives another trajectory.
  auto two_by_16 = Run("ring", "sync", 2, 16, 25);
  EXPECT_GT(RelativeError(two_by_16[0], one[0]), 1e-3);
}

TEST_F(SyncEquivalence, PsSyncFourWorkersTwoShardsMatchesOneWorker) {
  auto one = Run("ps", "sync", 1, 64, 25, /*shards=*/1);
  auto four = Run("ps", "sync", 4, 16, 25, /*shards=*/2);
  ASSERT_EQ(four.size(), 4u);
  ASSERT_FALSE(one[0].empty());
  for (int r = 0; r < 4; ++r) {
    const double err = RelativeError(four[r], one[0]);
    EXPECT_LE(err, 1e-4) << "rank " << r << " relative error " << err;
  }
}

TEST_F(SyncEquivalence, BucketedRingSyncMatchesOneWorker) {
  auto one = Run("ring", "sync", 1, 64, 25);
  auto four = Run("ring", "sync", 4, 16, 25, 1, "sgd", kSmallBuckets);
  ASSERT_EQ(four.size(), 4u);
  ASSERT_FALSE(four[0].empty());
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(Checksum(four[r].data(), four[r].size()),
              Checksum(four[0].data(), four[0].size()));
  }
  EXPECT_LE(RelativeError(four[0], one[0]), 1e-4);
}

// Hierarchical allreduce with two host groups of two ranks (spec.groups, as
// on one machine): replicas stay bit-identical, follow the ring's trajectory
// up to summation order, and every rank reports what each bucket ran.
TEST_F(SyncEquivalence, HierarchicalRingSyncKeepsReplicasIdentical) {
  auto ring = Run("ring", "sync", 4, 16, 25, 1, "sgd", kSmallBuckets, -1, "ring");
  auto hier =
      Run("ring", "sync", 4, 16, 25, 1, "sgd", kSmallBuckets, -1, "hier", "0,1,0,1");
  ASSERT_EQ(hier.size(), 4u);
  ASSERT_FALSE(hier[0].empty());
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(Checksum(hier[r].data(), hier[r].size()),
              Checksum(hier[0].data(), hier[0].size()))
        << "hierarchical replicas differ at rank " << r;
  }
  EXPECT_LE(RelativeError(hier[0], ring[0]), 1e-4);
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(done_[r].bucket_algorithms.size(), 2u) << "rank " << r;
    EXPECT_EQ(done_[r].bucket_algorithms[0], "hier");
    EXPECT_EQ(done_[r].bucket_algorithms[1], "hier");
  }
}

// Algorithm auto: each bucket runs what the built-in table chooses for its
// bytes, and says so.
TEST_F(SyncEquivalence, AutoReportsTheTablesChoicePerBucket) {
  auto four = Run("ring", "sync", 4, 16, 5, 1, "sgd", kSmallBuckets);
  ASSERT_EQ(four.size(), 4u);
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(Checksum(four[r].data(), four[r].size()),
              Checksum(four[0].data(), four[0].size()));
  }
  const JobDoneReport& d = done_[0];
  ASSERT_EQ(d.bucket_algorithms.size(), d.bucket_bytes.size());
  ASSERT_GT(d.bucket_bytes.size(), 0u);
  for (size_t b = 0; b < d.bucket_bytes.size(); ++b) {
    EXPECT_EQ(d.bucket_algorithms[b],
              AllreduceAlgorithmName(TuningTable::Default().Choose(
                  4, static_cast<uint64_t>(d.bucket_bytes[b]))))
        << "bucket " << b << " of " << d.bucket_bytes[b] << " bytes";
  }
}

TEST_F(SyncEquivalence, BucketedPsSyncAcrossShardsMatchesOneWorker) {
  auto one = Run("ps", "sync", 1, 64, 25);
  auto four = Run("ps", "sync", 4, 16, 25, 3, "sgd", kSmallBuckets);
  ASSERT_EQ(four.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    ASSERT_FALSE(four[r].empty());
    EXPECT_LE(RelativeError(four[r], one[0]), 1e-4) << "rank " << r;
  }
}

TEST_F(SyncEquivalence, ManySmallPsPartitionsInFlightMatchOneWorker) {
  auto one = Run("ps", "sync", 1, 64, 25);
  // 64 KiB partitions: ~15 partitions over 3 shards, all of a bucket in
  // flight at once, each reduced as it arrives on its shard.
  ps_partition_bytes_ = 64 << 10;
  auto four = Run("ps", "sync", 4, 16, 25, 3, "sgd", kSmallBuckets);
  auto async = Run("ps", "async", 3, 16, 20, 2, "adam", kSmallBuckets);
  ps_partition_bytes_ = 0;
  ASSERT_EQ(four.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    ASSERT_FALSE(four[r].empty());
    EXPECT_LE(RelativeError(four[r], one[0]), 1e-4) << "rank " << r;
  }
  ASSERT_EQ(async.size(), 3u);
  for (const auto& v : async) {
    ASSERT_FALSE(v.empty());
    for (float x : v) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST_F(SyncEquivalence, PsPushPullEndsAtItsDeadlineWhenAPeerNeverPushes) {
  auto ps = StartPs();
  const std::vector<float> init(1000, 0.5f);
  std::vector<float> grad(1000, 1.0f), params(1000, 0.0f);
  std::vector<PsPartitionRef> partitions;
  for (int p = 0; p < 3; ++p) {
    PsPartitionRef partition;
    partition.key = absl::StrCat("deadline-job/p", p);
    partition.address = ps->address;
    partition.offset = 300 * p;
    partition.count = p < 2 ? 300 : 400;
    partitions.push_back(partition);
  }
  PsClient client(/*rank=*/0, PsCredentials{TestKey()->SecretOf("deadline-job", 2), 2},
                  partitions);
  v1::ShardConfig config;
  config.set_world_size(2);  // rank 1 never comes
  config.set_mode(v1::SYNC_MODE_SYNC);
  config.set_optimizer(v1::OPTIMIZER_SGD);
  config.set_lr(0.1f);
  ASSERT_TRUE(client.Init(init.data(), config, absl::Now() + absl::Seconds(10)).ok());
  const absl::Time t0 = absl::Now();
  absl::Status st = client.PushPull(0, grad.data(), params.data(), {0, 1, 2},
                                    t0 + absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - t0;
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_LT(took, absl::Seconds(3));
  // The shard still holds rank 0's push of step 0: a retry is refused, not
  // summed twice.
  st =
      client.PushPull(0, grad.data(), params.data(), {0}, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  ps->store.EndJob("deadline-job", "test over");
  ps->server->Shutdown(std::chrono::system_clock::now());
}

// PushPull with the smallest window (raised to the number of shards) over
// many odd-sized partitions on two shards: four ranks push in their staggered
// orders, no step waits on a partition another rank has not sent, and every
// rank gets every partition's averaged SGD step. Two steps, so the second runs
// while the shards still answer the first's last partitions to slower ranks.
TEST_F(SyncEquivalence, PsPushPullWithTheSmallestWindowUpdatesEveryPartition) {
  constexpr int kWorld = 4;
  auto ps_a = StartPs();
  auto ps_b = StartPs();
  std::vector<PsPartitionRef> partitions;
  uint64_t offset = 0;
  for (int p = 0; p < 37; ++p) {
    PsPartitionRef partition;
    partition.key = absl::StrCat("window-job/p", p);
    partition.address = p % 2 == 0 ? ps_a->address : ps_b->address;
    partition.offset = offset;
    partition.count = 1 + (p * 7) % 13;
    offset += partition.count;
    partitions.push_back(partition);
  }
  const size_t total = offset;
  std::vector<int> all(partitions.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  const PsCredentials creds{TestKey()->SecretOf("window-job", kWorld), kWorld};
  v1::ShardConfig config;
  config.set_world_size(kWorld);
  config.set_mode(v1::SYNC_MODE_SYNC);
  config.set_optimizer(v1::OPTIMIZER_SGD);
  config.set_lr(0.1f);
  const std::vector<float> init(total, 0.5f);
  {
    PsClient rank0(0, creds, partitions);
    ASSERT_TRUE(rank0.Init(init.data(), config, absl::Now() + absl::Seconds(10)).ok());
  }
  std::vector<std::vector<float>> params(kWorld, std::vector<float>(total, 0));
  std::vector<absl::Status> status(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      PsClient client(r, creds, partitions);
      client.set_push_window(1);
      if (client.push_window() != 2) {
        status[r] = absl::InternalError("window not raised to the shards");
        return;
      }
      const std::vector<float> grad(total, static_cast<float>(r + 1));
      const absl::Time deadline = absl::Now() + absl::Seconds(20);
      for (int64_t step = 0; step < 2 && status[r].ok(); ++step) {
        status[r] = client.PushPull(step, grad.data(), params[r].data(), all, deadline);
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  // Each step: params -= 0.1 * mean(1, 2, 3, 4) = 0.25.
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    for (size_t i = 0; i < total; ++i) {
      ASSERT_NEAR(params[r][i], 0.0f, 1e-6) << "rank " << r << " float " << i;
    }
  }
  for (auto* ps : {ps_a.get(), ps_b.get()}) {
    ps->store.EndJob("window-job", "test over");
    ps->server->Shutdown(std::chrono::system_clock::now());
  }
}

// A Pull for a slice that is never installed ends at the call's deadline and
// the shard forgets it (the RPC's cancellation reaches the store); an
// outsider's Pull is refused at once and never waits.
TEST_F(SyncEquivalence, PsPullForAJobThatNeverStartsEndsAtItsDeadline) {
  auto ps = StartPs();
  std::vector<float> params(4, 0.0f);
  PsPartitionRef partition;
  partition.key = "never-job/p0";
  partition.address = ps->address;
  partition.count = 4;
  PsClient outsider(0, PsCredentials{std::string(64, 'f'), 1}, {partition});
  absl::Status st = outsider.Pull(params.data(), true, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_EQ(ps->store.NumPendingPulls(), 0u);
  PsClient member(0, PsCredentials{TestKey()->SecretOf("never-job", 1), 1}, {partition});
  const absl::Time t0 = absl::Now();
  st = member.Pull(params.data(), true, t0 + absl::Milliseconds(300));
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (ps->store.NumPendingPulls() > 0 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(ps->store.NumPendingPulls(), 0u);
  ps->server->Shutdown(std::chrono::system_clock::now());
}

#ifdef GRADSYNC_TEST_HAVE_TORCH
// The same equivalences on TorchScript modules (LeNet-5 and a small MLP from
// examples/models), trained through the same loop: sync jobs follow the
// one-worker trajectory, ring replicas stay bit-identical, async and SSP
// jobs run and stay finite.
class TorchSyncEquivalence : public SyncEquivalence {
 protected:
  static void SetUpTestSuite() {
    SyncEquivalence::SetUpTestSuite();
    const std::string cmd = std::string(GRADSYNC_TORCH_PYTHON) + " " +
                            GRADSYNC_SOURCE_DIR + "/tests/model/make_torch_models.py " +
                            Dir();
    made_ = std::system(cmd.c_str()) == 0;
  }
  static std::string Dir() { return std::string(GRADSYNC_TEST_TMP) + "/torch_sync"; }
  void Use(const std::string& file) {
    ASSERT_TRUE(made_) << "make_torch_models.py failed";
    torchscript_ = Dir() + "/" + file;
  }
  static bool made_;
};
bool TorchSyncEquivalence::made_ = false;

TEST_F(TorchSyncEquivalence, LeNetRingSyncFourWorkersMatchesOneWorker) {
  Use("lenet.pt");
  auto one = Run("ring", "sync", 1, 64, 12);
  // Small buckets: LeNet's ten parameters in several buckets.
  auto four = Run("ring", "sync", 4, 16, 12, 1, "sgd", 16 << 10);
  ASSERT_EQ(four.size(), 4u);
  ASSERT_FALSE(one[0].empty());
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(Checksum(four[r].data(), four[r].size()),
              Checksum(four[0].data(), four[0].size()))
        << "ring replicas differ at rank " << r;
  }
  const double err = RelativeError(four[0], one[0]);
  EXPECT_LE(err, 1e-4) << "relative error " << err;
  auto two_by_16 = Run("ring", "sync", 2, 16, 12);
  EXPECT_GT(RelativeError(two_by_16[0], one[0]), 1e-3);  // the check can fail
}

TEST_F(TorchSyncEquivalence, LeNetPsSyncFourWorkersTwoShardsMatchesOneWorker) {
  Use("lenet.pt");
  auto one = Run("ps", "sync", 1, 64, 12);
  auto four = Run("ps", "sync", 4, 16, 12, 2, "sgd", 16 << 10);
  ASSERT_EQ(four.size(), 4u);
  ASSERT_FALSE(one[0].empty());
  for (int r = 0; r < 4; ++r) {
    const double err = RelativeError(four[r], one[0]);
    EXPECT_LE(err, 1e-4) << "rank " << r << " relative error " << err;
  }
}

TEST_F(TorchSyncEquivalence, MlpAsyncModesRunAndStayFinite) {
  Use("mlp784.pt");
  auto ring = Run("ring", "async", 3, 16, 20, 1, "adam", 64 << 10);
  ASSERT_EQ(ring.size(), 3u);
  ASSERT_FALSE(ring[0].empty());
  for (size_t r = 1; r < ring.size(); ++r) {
    EXPECT_EQ(Checksum(ring[r].data(), ring[r].size()),
              Checksum(ring[0].data(), ring[0].size()));
  }
  for (int staleness : {-1, 2}) {  // ASGD and SSP
    auto ps = Run("ps", "async", 3, 16, 20, 2, "adam", 64 << 10, staleness);
    ASSERT_EQ(ps.size(), 3u);
    for (const auto& v : ps) {
      ASSERT_FALSE(v.empty());
      for (float x : v) ASSERT_TRUE(std::isfinite(x));
    }
    ASSERT_EQ(done_.size(), 3u);
    EXPECT_LT(done_[0].last_step_loss, 2.0) << "staleness " << staleness;
  }
}
#endif  // GRADSYNC_TEST_HAVE_TORCH

}  // namespace
}  // namespace sync_testing
}  // namespace gradsync
