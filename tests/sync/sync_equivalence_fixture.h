// The fixture of the equivalence tests (sync_equivalence_test.cc,
// async_equivalence_test.cc): a job's ranks run in one process, each on its
// own thread, through the real gRPC data path (peer services or PS shards on
// loopback), and Run returns each rank's final parameters.
#ifndef GRADSYNC_TESTS_SYNC_SYNC_EQUIVALENCE_FIXTURE_H_
#define GRADSYNC_TESTS_SYNC_SYNC_EQUIVALENCE_FIXTURE_H_

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
namespace sync_testing {

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

inline std::unique_ptr<PeerServer> StartPeer() {
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
    spec.set_weight_prediction(weight_prediction_);
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
        if (!torchscript_.empty()) req.source = ModelSource::kTorchScript;
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

  static double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      norm += double(b[i]) * b[i];
    }
    return std::sqrt(diff / norm);
  }

  inline static Dataset* train_ = nullptr;
  inline static Dataset* test_ = nullptr;
  // Each rank's JobDone report of the last Run.
  std::vector<JobDoneReport> done_;
  // PS partition bound for the next Runs (0: the default, 4 MiB).
  uint64_t ps_partition_bytes_ = 0;
  // A TorchScript file the next Runs train instead of the default MLP.
  std::string torchscript_;
  // The next Runs' JobSpec.weight_prediction (unspecified: validation's
  // default, on for ring async).
  v1::WeightPrediction weight_prediction_ = v1::WEIGHT_PREDICTION_UNSPECIFIED;
};

// The bucketed (GPU-style) trainer on the CPU model: buckets of 200 KB split
// the default MLP into 2 buckets, which the PS further cuts at shard bounds.
inline constexpr int64_t kSmallBuckets = 200 << 10;

}  // namespace sync_testing
}  // namespace gradsync

#endif  // GRADSYNC_TESTS_SYNC_SYNC_EQUIVALENCE_FIXTURE_H_
