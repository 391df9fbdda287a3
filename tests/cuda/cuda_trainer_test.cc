// The training loop (RunTraining, worker/train/trainer.h) on GPU models
// against the same loop on CPU models: world size 2, ring over the
// in-process transport or a parameter server on loopback gRPC, same seed and
// samples, TF32 off. A GradientSync wrapper sleeps inside SyncBucket, so that
// the GPU runs ahead of the communication threads and gradient slots and
// copy events are reused while copies and applies are still pending.
//
// What must hold:
//  - GPU ranks end within 1e-4 (relative L2) of CPU ranks: the GEMMs sum in
//    a different order, everything else is bit-identical or nearly so;
//  - ring ranks end bit-identical to each other, whatever device each runs
//    on: they apply the same averaged gradients with optimizers that are
//    bit-identical on CPU and GPU — a gradient applied late, early or from
//    the wrong slot shows as a difference.
// Skips without a GPU, or without Fashion-MNIST (naming the directory).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/job_secret.h"
#include "common/partition.h"
#include "common/spec/assignment_options.h"
#include "common/spec/job_spec.h"
#include "server/ps/ps_access.h"
#include "server/ps/ps_service.h"
#include "server/ps/ps_store.h"
#include "tests/sync/ps_test_util.h"
#include "worker/collectives/transport/inproc/inproc_transport.h"
#include "worker/model/cuda/cuda_backend.h"
#include "worker/model/cuda/cuda_model.h"
#include "worker/model/dataset.h"
#include "worker/model/device_model.h"
#include "worker/sync/gradient_sync_factory.h"
#include "worker/train/trainer.h"

namespace gradsync {
namespace {

constexpr char kNoGpu[] =
    "no CUDA GPU: DeviceCount() == 0 (no device or no working CUDA driver on "
    "this machine)";
constexpr int kCpu = -1;  // JobCase::devices entry for a CPU model

class Quiet : public TrainingReporter {
 public:
  void Progress(const ProgressReport&) override {}
  void EpochDone(const EpochReport&) override {}
};

// Forwards to `inner`, sleeping `delay` before every SyncBucket; with
// `hide_identity` it says it is not the identity even where inner is.
class SlowSync : public GradientSync {
 public:
  SlowSync(std::unique_ptr<GradientSync> inner, absl::Duration delay,
           bool hide_identity = false)
      : inner_(std::move(inner)), delay_(delay), hide_identity_(hide_identity) {}
  absl::Status Initialize(const std::vector<Range>& buckets, float* params) override {
    return inner_->Initialize(buckets, params);
  }
  absl::Status SyncBucket(int64_t step, int bucket, float* grad, float* params) override {
    absl::SleepFor(delay_);
    return inner_->SyncBucket(step, bucket, grad, params);
  }
  absl::Status Finish(float* params) override { return inner_->Finish(params); }
  void Abort(const absl::Status& status) override { inner_->Abort(status); }
  Output output() const override { return inner_->output(); }
  int pipeline_depth() const override { return inner_->pipeline_depth(); }
  bool identity() const override { return !hide_identity_ && inner_->identity(); }

 private:
  const std::unique_ptr<GradientSync> inner_;
  const absl::Duration delay_;
  const bool hide_identity_;
};

struct JobCase {
  std::string strategy = "ring";
  std::string mode = "sync";
  std::string optimizer = "sgd";
  std::vector<int> devices;  // per rank: a GPU index or kCpu
  int steps = 20;
  int batch = 37;
  bool evaluate = false;
  absl::Duration sync_delay = absl::Milliseconds(2);
  int64_t bucket_bytes = 200 << 10;  // 2 buckets for 784-256-128-10
  bool hide_identity = false;        // one rank: still copy and SyncBucket
};

std::string Describe(const JobCase& c) {
  std::string devices;
  for (int d : c.devices) {
    absl::StrAppend(&devices, devices.empty() ? "" : ",",
                    d == kCpu ? std::string("cpu") : absl::StrCat("gpu", d));
  }
  return absl::StrCat(c.strategy, "-", c.mode, " ", c.optimizer, " [", devices, "]");
}

double RelErr(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || b.empty()) return INFINITY;
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    n += double(b[i]) * b[i];
  }
  return std::sqrt(d / n);
}

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class CudaTrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (cuda::DeviceCount() == 0) return;
    absl::StatusOr<Dataset> train = LoadFashionMnist(kDefaultFashionMnistDir, true, 4096);
    absl::StatusOr<Dataset> test = LoadFashionMnist(kDefaultFashionMnistDir, false);
    if (!train.ok() || !test.ok()) {
      data_error_ = new std::string(
          absl::StrCat("Fashion-MNIST not available in ", kDefaultFashionMnistDir, ": ",
                       (train.ok() ? test.status() : train.status()).ToString()));
      return;
    }
    train_ = new Dataset(std::move(*train));
    test_ = new Dataset(std::move(*test));
  }
  static void TearDownTestSuite() {
    delete train_;
    delete test_;
    delete data_error_;
    train_ = test_ = nullptr;
    data_error_ = nullptr;
  }

  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << kNoGpu;
    if (data_error_ != nullptr) GTEST_SKIP() << *data_error_;
  }

  // Runs the job on one thread per rank; fills `out` with each rank's
  // outcome. Models are created first, here: a model that cannot be created
  // fails the test with its status.
  void RunJob(const JobCase& c, std::vector<TrainingOutcome>* out) {
    SCOPED_TRACE(Describe(c));
    static std::atomic<int> job_counter{0};
    const int world = static_cast<int>(c.devices.size());
    v1::JobSpec spec;
    spec.set_strategy(*ParseStrategy(c.strategy));
    spec.set_mode(*ParseSyncMode(c.mode));
    spec.set_workers(world);
    spec.set_model("mlp:784-256-128-10");
    spec.set_batch_size(c.batch);
    spec.set_steps(c.steps);
    spec.set_seed(3);
    spec.set_optimizer(*ParseOptimizer(c.optimizer));
    spec.set_lr(c.optimizer == "sgd" ? 0.05f : 0.001f);
    spec.set_momentum(0.9f);
    spec.set_bucket_bytes(c.bucket_bytes);
    spec.set_chunk_bytes(64 << 10);
    spec.set_step_timeout_ms(20000);
    spec.set_ps_shards(1);
    if (c.strategy == "ring" && c.mode == "async") spec.set_staleness(1);
    absl::StatusOr<v1::JobSpec> valid = ValidateJobSpec(spec, 1);
    ASSERT_TRUE(valid.ok()) << valid.status();
    absl::StatusOr<MlpSpec> model_spec = ParseModelSpec(valid->model());
    ASSERT_TRUE(model_spec.ok()) << model_spec.status();

    std::unique_ptr<PsServer> ps;
    if (c.strategy == "ps") {
      ps = StartPs();
      ASSERT_NE(ps->server, nullptr);
    }
    const std::string job_id = absl::StrCat("cuda-trainer-", ++job_counter);
    std::vector<v1::Assignment> as(world);
    for (int r = 0; r < world; ++r) {
      as[r].set_job_id(job_id);
      *as[r].mutable_spec() = *valid;
      as[r].set_rank(r);
      as[r].set_world_size(world);
      as[r].set_job_secret(TestKey()->SecretOf(job_id, world));
      as[r].set_num_params(NumParams(*model_spec));
      for (int w : model_spec->widths) as[r].add_layer_widths(w);
      if (ps) {
        auto* shard = as[r].add_ps_shards();
        shard->set_address(ps->address);
        shard->set_offset(0);
        shard->set_count(NumParams(*model_spec));
      }
    }

    std::vector<JobOptions> jobs;
    for (const v1::Assignment& a : as) {
      absl::StatusOr<JobOptions> job = JobOptionsOf(a);
      ASSERT_TRUE(job.ok()) << job.status();
      jobs.push_back(*std::move(job));
    }
    InProcGroup group(world);
    std::vector<std::unique_ptr<DeviceModel>> models;
    std::vector<std::unique_ptr<GradientSync>> syncs;
    for (int r = 0; r < world; ++r) {
      absl::StatusOr<std::unique_ptr<DeviceModel>> m =
          c.devices[r] == kCpu ? MakeCpuModel(*model_spec)
                               : cuda::MakeCudaModel(*model_spec, c.devices[r],
                                                     /*allow_tf32=*/false, c.batch);
      ASSERT_TRUE(m.ok()) << "rank " << r << ": " << m.status();
      models.push_back(std::move(*m));
      absl::StatusOr<std::unique_ptr<GradientSync>> s =
          MakeGradientSync(&jobs[r], c.strategy == "ring" ? group.transport(r) : nullptr);
      ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s.status();
      syncs.push_back(
          std::make_unique<SlowSync>(std::move(*s), c.sync_delay, c.hide_identity));
    }

    out->assign(world, TrainingOutcome());
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        Quiet quiet;
        TrainingOptions o;
        o.evaluate = c.evaluate;
        const Dataset empty;
        (*out)[r] = RunTraining(jobs[r], *train_, c.evaluate ? *test_ : empty,
                                models[r].get(), syncs[r].get(), &quiet, nullptr, o);
      });
    }
    for (std::thread& t : threads) t.join();
    if (ps) ps->server->Shutdown(std::chrono::system_clock::now());
    for (int r = 0; r < world; ++r) {
      const TrainingOutcome& o = (*out)[r];
      ASSERT_TRUE(o.status.ok()) << "rank " << r << ": " << o.status;
      ASSERT_EQ(o.params.size(), NumParams(*model_spec)) << "rank " << r;
      EXPECT_EQ(o.done.steps, c.steps) << "rank " << r;
    }
  }

  // Runs `gpu` and the same job with every rank on the CPU; compares.
  void CompareWithCpu(JobCase gpu, bool ranks_bit_identical) {
    SCOPED_TRACE(Describe(gpu));
    std::vector<TrainingOutcome> got, want;
    ASSERT_NO_FATAL_FAILURE(RunJob(gpu, &got));
    JobCase cpu = gpu;
    cpu.devices.assign(gpu.devices.size(), kCpu);
    ASSERT_NO_FATAL_FAILURE(RunJob(cpu, &want));
    for (size_t r = 0; r < got.size(); ++r) {
      const double e = RelErr(got[r].params, want[r].params);
      EXPECT_LE(e, 1e-4) << "rank " << r << ": GPU vs CPU relative error " << e;
      std::cout << Describe(gpu) << " rank " << r << ": GPU vs CPU relative error " << e
                << "\n";
      if (ranks_bit_identical) {
        EXPECT_TRUE(BitIdentical(got[r].params, got[0].params))
            << "rank " << r << " differs from rank 0";
      }
    }
  }

  static Dataset* train_;
  static Dataset* test_;
  static std::string* data_error_;
};

Dataset* CudaTrainerTest::train_ = nullptr;
Dataset* CudaTrainerTest::test_ = nullptr;
std::string* CudaTrainerTest::data_error_ = nullptr;

TEST_F(CudaTrainerTest, RingMatchesTheCpu) {
  for (const char* opt : {"sgd", "adam"}) {
    for (const char* mode : {"sync", "async"}) {
      JobCase c;
      c.optimizer = opt;
      c.mode = mode;
      c.devices = {0, 0};
      CompareWithCpu(c, /*ranks_bit_identical=*/true);
    }
  }
}

// Without the sleeping sync too: the GPU then runs at its own pace.
TEST_F(CudaTrainerTest, RingMatchesTheCpuWithoutDelay) {
  JobCase c;
  c.mode = "async";
  c.optimizer = "adam";
  c.devices = {0, 0};
  c.sync_delay = absl::ZeroDuration();
  c.steps = 40;
  CompareWithCpu(c, /*ranks_bit_identical=*/true);
}

// One rank: the gradient stays on the device (no copy, no SyncBucket), and
// the parameters equal those of the same job through the host copies, bit
// for bit, and the CPU's within the usual error.
TEST_F(CudaTrainerTest, OneRankKeepsItsGradientOnTheDevice) {
  for (const char* opt : {"sgd", "adam"}) {
    JobCase c;
    c.optimizer = opt;
    c.devices = {0};
    c.sync_delay = absl::ZeroDuration();
    std::vector<TrainingOutcome> own, copied;
    ASSERT_NO_FATAL_FAILURE(RunJob(c, &own));
    EXPECT_EQ(own[0].done.comm_seconds, 0.0) << opt;
    c.hide_identity = true;
    ASSERT_NO_FATAL_FAILURE(RunJob(c, &copied));
    EXPECT_GT(copied[0].done.comm_seconds, 0.0) << opt;
    EXPECT_TRUE(BitIdentical(own[0].params, copied[0].params))
        << opt << ": relative difference " << RelErr(own[0].params, copied[0].params);
    c.hide_identity = false;
    CompareWithCpu(c, /*ranks_bit_identical=*/false);
  }
}

// One rank on the GPU, one on the CPU: still bit-identical replicas.
TEST_F(CudaTrainerTest, GpuAndCpuRanksStayBitIdentical) {
  for (const char* mode : {"sync", "async"}) {
    JobCase c;
    c.mode = mode;
    c.optimizer = std::string(mode) == "sync" ? "sgd" : "adam";
    c.devices = {0, kCpu};
    std::vector<TrainingOutcome> out;
    ASSERT_NO_FATAL_FAILURE(RunJob(c, &out));
    EXPECT_TRUE(BitIdentical(out[0].params, out[1].params))
        << Describe(c) << ": relative difference "
        << RelErr(out[0].params, out[1].params);
  }
}

// Parameter server: the model receives parameters (SetParamsRange), not
// gradients.
TEST_F(CudaTrainerTest, ParameterServerMatchesTheCpu) {
  JobCase c;
  c.strategy = "ps";
  c.devices = {0, 0};
  CompareWithCpu(c, /*ranks_bit_identical=*/false);
}

// Evaluation on: rank 0 evaluates the 10000 test samples (two pinned blocks
// on the GPU) at the epoch boundary — between pipelined steps — and at the
// end.
TEST_F(CudaTrainerTest, EvaluationMatchesTheCpu) {
  JobCase c;
  c.devices = {0, 0};
  c.evaluate = true;
  c.steps = 60;  // 4096 / (2 * 37) = 55 steps per epoch
  std::vector<TrainingOutcome> got, want;
  ASSERT_NO_FATAL_FAILURE(RunJob(c, &got));
  JobCase cpu = c;
  cpu.devices = {kCpu, kCpu};
  ASSERT_NO_FATAL_FAILURE(RunJob(cpu, &want));
  EXPECT_LE(RelErr(got[0].params, want[0].params), 1e-4);
  const double acc = got[0].done.test_accuracy;
  EXPECT_GT(acc, 0.3) << "the model did not learn";
  // Parameters within 1e-4: a few of 10000 predictions may flip.
  EXPECT_NEAR(acc, want[0].done.test_accuracy, 0.005);
  std::cout << "test accuracy GPU " << acc << ", CPU " << want[0].done.test_accuracy
            << "\n";
}

TEST_F(CudaTrainerTest, TwoGpus) {
  if (cuda::DeviceCount() < 2) {
    GTEST_SKIP() << "needs 2 GPUs, " << cuda::DeviceCount() << " visible";
  }
  JobCase c;
  c.mode = "async";
  c.devices = {0, 1};
  CompareWithCpu(c, /*ranks_bit_identical=*/true);
}

}  // namespace
}  // namespace gradsync
