// Data-parallel semantics end to end through the real gRPC data path, in one
// process: N workers x batch b follow the same trajectory as 1 worker x N*b
// (ring-sync and ps-sync), ring replicas stay bit-identical (sync and async).
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/kernels.h"
#include "common/optimizer.h"
#include "common/partition.h"
#include "common/spec/assignment_options.h"
#include "common/spec/job_spec.h"
#include "common/spec/tuning_table.h"
#include "server/ps/ps_service.h"
#include "server/ps/ps_store.h"
#include "tests/sync/ps_test_util.h"
#include "worker/collectives/transport/grpc/grpc_transport.h"
#include "worker/model/device_factory.h"
#include "worker/model/device_model.h"
#include "worker/model/mlp.h"
#include "worker/sync/gradient_sync_factory.h"
#include "worker/sync/ps_client.h"
#include "worker/train/trainer.h"
#include "worker/train/training_steps.h"

namespace gradsync {
namespace {

class NullReporter : public TrainingReporter {
 public:
  void Progress(const ProgressReport&) override {}
  void EpochDone(const EpochReport&) override {}
};

struct PeerServer {
  PeerMailboxes mailboxes;
  std::unique_ptr<PeerService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

std::unique_ptr<PeerServer> StartPeer() {
  auto s = std::make_unique<PeerServer>();
  s->service = std::make_unique<PeerService>(&s->mailboxes);
  auto started = StartServer("127.0.0.1:0", {s->service.get()});
  EXPECT_TRUE(started.ok()) << started.status();
  s->server = std::move(started->server);
  s->address = LocalAddress("127.0.0.1:0", started->port);
  return s;
}

class SyncEquivalence : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto train = LoadFashionMnist(kDefaultFashionMnistDir, true, 8192);
    ASSERT_TRUE(train.ok()) << train.status();
    train_ = new Dataset(std::move(*train));
    test_ = new Dataset();
  }
  static void TearDownTestSuite() {
    delete train_;
    delete test_;
  }

  // Runs a job in-process; returns each rank's final parameters.
  std::vector<std::vector<float>> Run(const std::string& strategy,
                                      const std::string& mode, int world, int batch,
                                      int steps, int shards = 1,
                                      const std::string& optimizer = "sgd",
                                      int64_t bucket_bytes = 0, int staleness = -1,
                                      const std::string& algorithm = "auto",
                                      const std::string& groups = "") {
    static int job_counter = 0;
    const std::string job_id = absl::StrCat("t-", ++job_counter);
    v1::JobSpec spec;
    spec.set_strategy(*ParseStrategy(strategy));
    spec.set_mode(*ParseSyncMode(mode));
    spec.set_workers(world);
    spec.set_batch_size(batch);
    spec.set_steps(steps);
    spec.set_step_timeout_ms(20000);
    spec.set_optimizer(*ParseOptimizer(optimizer));
    spec.set_lr(optimizer == "sgd" ? 0.05f : 0.001f);
    spec.set_momentum(0.9f);
    spec.set_seed(7);
    spec.set_ps_shards(shards);
    spec.set_chunk_bytes(64 << 10);  // several segments per chunk
    // 0: the default (one bucket for this model).
    spec.set_bucket_bytes(bucket_bytes);
    if (staleness >= 0) spec.set_staleness(staleness);
    spec.set_algorithm(*ParseAlgorithm(algorithm));
    spec.set_groups(groups);
    auto valid = ValidateJobSpec(spec, shards);
    EXPECT_TRUE(valid.ok()) << valid.status();
    // With torchscript_: that module instead of the default MLP (the
    // assignment then carries no widths, as the coordinator sends it).
    const MlpSpec model =
        torchscript_.empty() ? *ParseModelSpec(valid->model()) : MlpSpec{};
    const size_t n = NumParams(model);

    std::vector<std::unique_ptr<PsServer>> ps;
    std::vector<std::unique_ptr<PeerServer>> peers;
    std::vector<v1::Assignment> as(world);
    if (strategy == "ps") {
      for (int s = 0; s < shards; ++s) ps.push_back(StartPs());
      for (auto& a : as) {
        for (int s = 0; s < shards; ++s) {
          auto* info = a.add_ps_shards();
          info->set_address(ps[s]->address);
          info->set_partition_bytes(ps_partition_bytes_);
        }
      }
    } else {
      for (int r = 0; r < world; ++r) peers.push_back(StartPeer());
    }
    for (int r = 0; r < world; ++r) {
      as[r].set_job_id(job_id);
      *as[r].mutable_spec() = *valid;
      as[r].set_rank(r);
      as[r].set_world_size(world);
      as[r].set_job_secret(TestKey()->SecretOf(job_id, world));
      as[r].set_num_params(n);
      for (int w : model.widths) as[r].add_layer_widths(w);
      for (auto& p : peers) as[r].add_peer_addresses(p->address);
    }
    // As the worker daemon does: the assignment as plain options, once.
    std::vector<JobOptions> jobs;
    for (const v1::Assignment& a : as) {
      absl::StatusOr<JobOptions> job = JobOptionsOf(a);
      EXPECT_TRUE(job.ok()) << job.status();
      jobs.push_back(job.ok() ? *std::move(job) : JobOptions());
      if (!torchscript_.empty()) jobs.back().torchscript_sha256 = "test";
    }
    std::vector<std::vector<float>> params(world);
    std::vector<absl::Status> status(world);
    done_.assign(world, JobDoneReport());
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        std::unique_ptr<GrpcTransport> t;
        if (strategy == "ring") {
          GrpcTransportOptions topts;
          topts.job_secret = as[r].job_secret();
          t = std::make_unique<GrpcTransport>(
              job_id, r,
              std::vector<std::string>(as[r].peer_addresses().begin(),
                                       as[r].peer_addresses().end()),
              peers[r]->mailboxes.Open(job_id, topts.job_secret, world), topts);
        }
        auto sync = MakeGradientSync(&jobs[r], t.get());
        if (!sync.ok()) {
          status[r] = sync.status();
          return;
        }
        NullReporter rep;
        TrainingOptions opts;
        opts.evaluate = false;
        DeviceRequest req;
        req.model = model;
        req.torchscript_path = torchscript_;
        req.features = train_->features;
        req.classes = train_->classes;
        auto cpu = MakeDeviceModel(req);
        if (!cpu.ok()) {
          status[r] = cpu.status();
          return;
        }
        TrainingOutcome out = RunTraining(jobs[r], *train_, *test_, cpu->get(),
                                          sync->get(), &rep, nullptr, opts);
        status[r] = out.status;
        done_[r] = out.done;
        params[r] = std::move(out.params);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < world; ++r) EXPECT_TRUE(status[r].ok()) << status[r];
    for (auto& p : ps) p->server->Shutdown(std::chrono::system_clock::now());
    for (auto& p : peers) p->server->Shutdown(std::chrono::system_clock::now());
    return params;
  }

  // What ring async with staleness s computes, serially on one thread: step t
  // computes every rank's gradient on parameters to which the averaged
  // gradients of steps <= t - s - 1 have been applied (SGD as in Run).
  static std::vector<float> StaleReference(int world, int batch, int steps, int s) {
    const MlpSpec spec = *ParseModelSpec(kDefaultModel);
    Mlp mlp(spec);
    const size_t n = mlp.num_params();
    std::vector<float> params(n), grad(n);
    mlp.InitParams(7, params.data());
    OptimizerOptions o;
    o.kind = OptimizerKind::kSgd;
    o.lr = 0.05f;
    o.momentum = 0.9f;
    Optimizer opt = *Optimizer::Create(o, n);
    std::vector<StepPlan> plans;
    for (int r = 0; r < world; ++r) {
      JobOptions a;
      a.rank = r;
      a.world_size = world;
      a.batch_size = batch;
      a.steps = steps;
      a.seed = 7;
      plans.push_back(*StepPlan::Make(a, *train_));
    }
    std::vector<std::vector<float>> avg(steps, std::vector<float>(n, 0.0f));
    int applied = 0;
    for (int t = 0; t < steps; ++t) {
      for (int r = 0; r < world; ++r) {
        plans[r].Gather(t);
        mlp.ForwardBackward(params.data(), plans[r].x(), plans[r].y(), batch,
                            grad.data());
        for (size_t i = 0; i < n; ++i) avg[t][i] += grad[i] / world;
      }
      for (; applied <= t - s; ++applied) opt.Apply(params.data(), avg[applied].data());
    }
    for (; applied < steps; ++applied) opt.Apply(params.data(), avg[applied].data());
    return params;
  }

  static double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      norm += double(b[i]) * b[i];
    }
    return std::sqrt(diff / norm);
  }

  static Dataset* train_;
  static Dataset* test_;
  // Each rank's JobDone report of the last Run.
  std::vector<JobDoneReport> done_;
  // PS partition bound for the next Runs (0: the default, 4 MiB).
  uint64_t ps_partition_bytes_ = 0;
  // A TorchScript file the next Runs train instead of the default MLP.
  std::string torchscript_;
};

Dataset* SyncEquivalence::train_ = nullptr;
Dataset* SyncEquivalence::test_ = nullptr;

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

TEST_F(SyncEquivalence, RingAsyncReplicasStayIdenticalAndAdamWorks) {
  auto four = Run("ring", "async", 3, 16, 21, 1, "adam");
  ASSERT_EQ(four.size(), 3u);
  ASSERT_FALSE(four[0].empty());
  for (size_t r = 1; r < four.size(); ++r) {
    EXPECT_EQ(Checksum(four[r].data(), four[r].size()),
              Checksum(four[0].data(), four[0].size()));
  }
  // It trained: parameters moved away from the sync trajectory's start but
  // stayed finite.
  for (float x : four[0]) ASSERT_TRUE(std::isfinite(x));
}

TEST_F(SyncEquivalence, PsAsyncRunsToCompletion) {
  auto p = Run("ps", "async", 3, 16, 20, 2);
  ASSERT_EQ(p.size(), 3u);
  for (const auto& v : p) ASSERT_FALSE(v.empty());
}

// The bucketed (GPU-style) trainer on the CPU model: buckets of 200 KB split
// the default MLP into 2 buckets, which the PS further cuts at shard bounds.
constexpr int64_t kSmallBuckets = 200 << 10;

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
  std::vector<PsPiece> pieces;
  for (int p = 0; p < 3; ++p) {
    PsPiece piece;
    piece.key = absl::StrCat("deadline-job/p", p);
    piece.address = ps->address;
    piece.offset = 300 * p;
    piece.count = p < 2 ? 300 : 400;
    pieces.push_back(piece);
  }
  PsClient client(/*rank=*/0, PsCredentials{TestKey()->SecretOf("deadline-job", 2), 2},
                  pieces);
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
// many odd-sized pieces on two shards: four ranks push in their staggered
// orders, no step waits on a piece another rank has not sent, and every
// rank gets every piece's averaged SGD step. Two steps, so the second runs
// while the shards still answer the first's last pieces to slower ranks.
TEST_F(SyncEquivalence, PsPushPullWithTheSmallestWindowUpdatesEveryPiece) {
  constexpr int kWorld = 4;
  auto ps_a = StartPs();
  auto ps_b = StartPs();
  std::vector<PsPiece> pieces;
  uint64_t offset = 0;
  for (int p = 0; p < 37; ++p) {
    PsPiece piece;
    piece.key = absl::StrCat("window-job/p", p);
    piece.address = p % 2 == 0 ? ps_a->address : ps_b->address;
    piece.offset = offset;
    piece.count = 1 + (p * 7) % 13;
    offset += piece.count;
    pieces.push_back(piece);
  }
  const size_t total = offset;
  std::vector<int> all(pieces.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  const PsCredentials creds{TestKey()->SecretOf("window-job", kWorld), kWorld};
  v1::ShardConfig config;
  config.set_world_size(kWorld);
  config.set_mode(v1::SYNC_MODE_SYNC);
  config.set_optimizer(v1::OPTIMIZER_SGD);
  config.set_lr(0.1f);
  const std::vector<float> init(total, 0.5f);
  {
    PsClient rank0(0, creds, pieces);
    ASSERT_TRUE(rank0.Init(init.data(), config, absl::Now() + absl::Seconds(10)).ok());
  }
  std::vector<std::vector<float>> params(kWorld, std::vector<float>(total, 0));
  std::vector<absl::Status> status(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      PsClient client(r, creds, pieces);
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
  PsPiece piece;
  piece.key = "never-job/p0";
  piece.address = ps->address;
  piece.count = 4;
  PsClient outsider(0, PsCredentials{std::string(64, 'f'), 1}, {piece});
  absl::Status st = outsider.Pull(params.data(), true, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_EQ(ps->store.NumPendingPulls(), 0u);
  PsClient member(0, PsCredentials{TestKey()->SecretOf("never-job", 1), 1}, {piece});
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

TEST_F(SyncEquivalence, RingAsyncFollowsTheSerialStaleReference) {
  // Step u's averaged gradient is applied before step u+s+1 computes.
  for (int s : {1, 2, 3}) {
    auto got = Run("ring", "async", 3, 16, 12, 1, "sgd", 0, s);
    ASSERT_EQ(got.size(), 3u);
    ASSERT_FALSE(got[0].empty());
    for (int r = 1; r < 3; ++r) EXPECT_EQ(got[r], got[0]) << "s=" << s;
    const auto want = StaleReference(3, 16, 12, s);
    EXPECT_LE(RelativeError(got[0], want), 1e-4) << "s=" << s;
    // The reference can tell staleness levels apart.
    if (s > 1) {
      EXPECT_GT(RelativeError(got[0], StaleReference(3, 16, 12, s - 1)), 1e-4)
          << "s=" << s;
    }
  }
}

TEST_F(SyncEquivalence, BucketedRingAsyncFollowsTheSameStaleTrajectory) {
  // The bucket layout does not change what is applied when.
  auto plain = Run("ring", "async", 3, 16, 25, 1, "sgd");
  auto bucketed = Run("ring", "async", 3, 16, 25, 1, "sgd", kSmallBuckets);
  ASSERT_EQ(bucketed.size(), 3u);
  ASSERT_FALSE(bucketed[0].empty());
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(Checksum(bucketed[r].data(), bucketed[r].size()),
              Checksum(bucketed[0].data(), bucketed[0].size()));
  }
  EXPECT_LE(RelativeError(bucketed[0], plain[0]), 1e-4);
  // ...and not the sync one: staleness changes the trajectory.
  auto sync = Run("ring", "sync", 3, 16, 25, 1, "sgd");
  EXPECT_GT(RelativeError(bucketed[0], sync[0]), 1e-3);
}

TEST_F(SyncEquivalence, BucketedPsAsyncRunsToCompletion) {
  auto p = Run("ps", "async", 3, 16, 20, 2, "adam", kSmallBuckets);
  ASSERT_EQ(p.size(), 3u);
  for (const auto& v : p) ASSERT_FALSE(v.empty());
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
}  // namespace gradsync
