// The one training loop (worker/train/trainer.h) with a fake GradientSync:
// how far computation runs ahead of synchronisation, and failure paths.
#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/spec/job_spec.h"
#include "worker/model/device_model.h"
#include "worker/train/trainer.h"

namespace gradsync {
namespace {

constexpr int kFeatures = 8;
const std::vector<int> kWidths = {kFeatures, 6, 3};

class Quiet : public TrainingReporter {
 public:
  void Progress(const v1::WorkerMessage::Progress&) override {}
  void EpochDone(const v1::WorkerMessage::EpochDone&) override {}
};

Dataset TinyData(int64_t n) {
  Dataset d;
  d.n = n;
  d.features = kFeatures;
  d.classes = 3;
  for (int64_t i = 0; i < n * kFeatures; ++i) d.images.push_back((i % 7) / 7.0f);
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<uint8_t>(i % 3));
  return d;
}

v1::Assignment OneRank(int steps) {
  v1::Assignment a;
  a.set_job_id("loop");
  a.set_rank(0);
  a.set_world_size(1);
  for (int w : kWidths) a.add_layer_widths(w);
  a.set_num_params(NumParams(MlpSpec{kWidths}));
  v1::JobSpec* s = a.mutable_spec();
  s->set_batch_size(4);
  s->set_steps(steps);
  s->set_optimizer(v1::OPTIMIZER_SGD);
  s->set_lr(0.01f);
  s->set_bucket_bytes(64);  // several buckets
  return a;
}

// Counts forward/backward passes of the CPU model it wraps.
class CountingModel final : public DeviceModel {
 public:
  explicit CountingModel(std::unique_ptr<DeviceModel> inner)
      : inner_(std::move(inner)) {}
  std::atomic<int64_t> passes{0};

  std::string name() const override { return inner_->name(); }
  size_t num_params() const override { return inner_->num_params(); }
  int num_layers() const override { return inner_->num_layers(); }
  Range LayerRange(int l) const override { return inner_->LayerRange(l); }
  absl::Status Configure(const std::vector<Range>& b,
                         const OptimizerOptions& o) override {
    return inner_->Configure(b, o);
  }
  absl::Status SetParams(const float* h) override { return inner_->SetParams(h); }
  absl::Status SetParamsRange(Range r, const float* h) override {
    return inner_->SetParamsRange(r, h);
  }
  absl::Status GetParams(float* h) override { return inner_->GetParams(h); }
  absl::Status StageBatch(const float* x, const uint8_t* y, int b) override {
    return inner_->StageBatch(x, y, b);
  }
  absl::StatusOr<float> ForwardBackward(
      int batch, const std::function<void(int)>& ready) override {
    ++passes;
    return inner_->ForwardBackward(batch, ready);
  }
  absl::Status CopyGradToHost(int b, float* h) override {
    return inner_->CopyGradToHost(b, h);
  }
  absl::Status ApplyGradient(int b, const float* h) override {
    return inner_->ApplyGradient(b, h);
  }
  absl::StatusOr<Mlp::Eval> Evaluate(const float* x, const uint8_t* y,
                                     int64_t n) override {
    return inner_->Evaluate(x, y, n);
  }
  absl::StatusOr<std::shared_ptr<float>> AllocHost(size_t n) override {
    return inner_->AllocHost(n);
  }

 private:
  std::unique_ptr<DeviceModel> inner_;
};

// Averaging "allreduce" of one rank that takes `delay` per bucket and records
// how many steps had started computing beyond the one it synchronises, just
// before that step's last bucket completes.
class SlowSync final : public GradientSync {
 public:
  SlowSync(int depth, absl::Duration delay, const CountingModel* model)
      : depth_(depth), delay_(delay), model_(model) {}

  absl::Status Initialize(const std::vector<Range>& b, float*) override {
    buckets_ = static_cast<int>(b.size());
    return absl::OkStatus();
  }
  absl::Status SyncBucket(int64_t step, int bucket, float*, float*) override {
    if (fail_at_ >= 0 && step == fail_at_) {
      return absl::UnavailableError("peer vanished");
    }
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&aborted_), delay_);
    if (aborted_) return absl::CancelledError("aborted");
    if (bucket == buckets_ - 1) {
      // Step `step` is not synchronised until this returns: every pass
      // started by now ran on parameters that lack it.
      max_ahead_ = std::max<int64_t>(max_ahead_, model_->passes - 1 - step);
    }
    return absl::OkStatus();
  }
  absl::Status Finish(float*) override { return absl::OkStatus(); }
  void Abort(const absl::Status&) override {
    absl::MutexLock lock(&mu_);
    aborted_ = true;
  }
  Output output() const override { return Output::kAveragedGradient; }
  int pipeline_depth() const override { return depth_; }

  int64_t max_ahead_ = 0;  // communication thread only, read after the run
  int64_t fail_at_ = -1;

 private:
  const int depth_;
  const absl::Duration delay_;
  const CountingModel* const model_;
  int buckets_ = 0;
  absl::Mutex mu_;
  bool aborted_ = false;
};

std::unique_ptr<CountingModel> Model() {
  return std::make_unique<CountingModel>(*MakeCpuModel(MlpSpec{kWidths}));
}

TEST(TrainingLoop, ComputeRunsUpToDepthStepsAheadOfSynchronisation) {
  const Dataset data = TinyData(64);
  for (int depth : {0, 1, 3}) {
    auto model = Model();
    SlowSync sync(depth, absl::Milliseconds(5), model.get());
    Quiet q;
    TrainingOptions o;
    o.evaluate = false;
    TrainingOutcome out = RunTraining(OneRank(12), data, Dataset{}, model.get(),
                                      &sync, &q, nullptr, o);
    ASSERT_TRUE(out.status.ok()) << out.status;
    // Step t + depth + 1 never computes before step t is applied...
    EXPECT_LE(sync.max_ahead_, depth) << "depth " << depth;
    // ...and with slow communication the loop does use the slack.
    EXPECT_EQ(sync.max_ahead_, depth) << "depth " << depth;
    EXPECT_GT(out.done.comm_seconds(), 0);
    EXPECT_EQ(out.done.steps(), 12);
  }
}

TEST(TrainingLoop, ASyncFailureEndsTheRunWithItsStatus) {
  const Dataset data = TinyData(64);
  auto model = Model();
  SlowSync sync(1, absl::Milliseconds(1), model.get());
  sync.fail_at_ = 5;
  Quiet q;
  const absl::Time t0 = absl::Now();
  TrainingOutcome out = RunTraining(OneRank(1000), data, Dataset{}, model.get(),
                                    &sync, &q, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(out.status)) << out.status;
  EXPECT_EQ(out.done.code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
}

TEST(TrainingLoop, CancellationAbortsTheSyncAndReturns) {
  const Dataset data = TinyData(64);
  auto model = Model();
  SlowSync sync(0, absl::Seconds(30), model.get());  // would block long
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancelled = true;
    sync.Abort(absl::CancelledError("job cancelled"));  // as the daemon does
  });
  Quiet q;
  const absl::Time t0 = absl::Now();
  TrainingOutcome out = RunTraining(OneRank(1000), data, Dataset{}, model.get(),
                                    &sync, &q, &cancelled);
  canceller.join();
  EXPECT_TRUE(absl::IsCancelled(out.status)) << out.status;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
}

TEST(TrainingLoop, BadAssignmentsFailTheJobNotTheProcess) {
  const Dataset data = TinyData(64);
  auto model = Model();
  SlowSync sync(0, absl::ZeroDuration(), model.get());
  Quiet q;
  v1::Assignment a = OneRank(3);
  a.clear_layer_widths();
  a.add_layer_widths(kFeatures);
  TrainingOutcome out =
      RunTraining(a, data, Dataset{}, model.get(), &sync, &q, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(out.status)) << out.status;
  a = OneRank(3);
  a.set_num_params(a.num_params() + 1);
  out = RunTraining(a, data, Dataset{}, model.get(), &sync, &q, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(out.status)) << out.status;
}

}  // namespace
}  // namespace gradsync
