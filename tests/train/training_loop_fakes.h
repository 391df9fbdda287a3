// Fakes of the training-loop tests (training_loop_test.cc,
// training_overlap_test.cc): a tiny data set and job, a CPU model that counts
// its passes, and a GradientSync that takes a set time per bucket.
#ifndef GRADSYNC_TESTS_TRAIN_TRAINING_LOOP_FAKES_H_
#define GRADSYNC_TESTS_TRAIN_TRAINING_LOOP_FAKES_H_

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/spec/job_limits.h"
#include "common/testing/fake_env.h"
#include "worker/model/device_model.h"
#include "worker/train/trainer.h"

namespace gradsync {
namespace training_testing {

inline constexpr int kFeatures = 8;
inline const std::vector<int> kWidths = {kFeatures, 6, 3};

class Quiet : public TrainingReporter {
 public:
  void Progress(const ProgressReport&) override {}
  void EpochDone(const EpochReport&) override {}
};

inline Dataset TinyData(int64_t n) {
  Dataset d;
  d.n = n;
  d.features = kFeatures;
  d.classes = 3;
  for (int64_t i = 0; i < n * kFeatures; ++i) d.images.push_back((i % 7) / 7.0f);
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<uint8_t>(i % 3));
  return d;
}

inline JobOptions OneRank(int steps) {
  JobOptions a;
  a.job_id = "loop";
  a.rank = 0;
  a.world_size = 1;
  a.layer_widths = kWidths;
  a.num_params = NumParams(MlpSpec{kWidths});
  a.batch_size = 4;
  a.steps = steps;
  a.optimizer = {OptimizerKind::kSgd, /*lr=*/0.01f, /*momentum=*/0};
  a.bucket_bytes = 64;  // several buckets
  return a;
}

// Counts forward/backward passes of the CPU model it wraps.
class CountingModel final : public DeviceModel {
 public:
  explicit CountingModel(std::unique_ptr<DeviceModel> inner) : inner_(std::move(inner)) {}
  std::atomic<int64_t> passes{0};

  std::string name() const override { return inner_->name(); }
  size_t num_params() const override { return inner_->num_params(); }
  int num_layers() const override { return inner_->num_layers(); }
  Range LayerRange(int l) const override { return inner_->LayerRange(l); }
  absl::Status Configure(const std::vector<Range>& b, const OptimizerOptions& o,
                         int slots) override {
    return inner_->Configure(b, o, slots);
  }
  absl::Status SetParams(const float* h) override { return inner_->SetParams(h); }
  absl::Status SetParamsRange(Range r, const float* h) override {
    return inner_->SetParamsRange(r, h);
  }
  absl::Status GetParams(float* h) override { return inner_->GetParams(h); }
  absl::Status StageBatch(const float* x, const uint8_t* y, int b) override {
    return inner_->StageBatch(x, y, b);
  }
  absl::Status ForwardBackward(int batch,
                               const std::function<void(int)>& ready) override {
    ++passes;
    return inner_->ForwardBackward(batch, ready);
  }
  absl::StatusOr<float> TakeLoss() override { return inner_->TakeLoss(); }
  absl::Status StartGradCopy(int b, int slot, float* h) override {
    return inner_->StartGradCopy(b, slot, h);
  }
  absl::Status WaitGradCopy(int b, int slot) override {
    return inner_->WaitGradCopy(b, slot);
  }
  absl::Status ApplyGradient(int b, const float* h) override {
    return inner_->ApplyGradient(b, h);
  }
  absl::Status ApplyOwnGradient(int b) override { return inner_->ApplyOwnGradient(b); }
  absl::StatusOr<EvalResult> Evaluate(const float* x, const uint8_t* y,
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
    ++calls_;
    if (fail_at_ >= 0 && step == fail_at_) {
      return absl::UnavailableError("peer vanished");
    }
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&aborted_), delay_);
    if (aborted_) return absl::CancelledError("aborted");
    if (model_ != nullptr && bucket == buckets_ - 1) {
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
  bool identity() const override { return identity_; }

  int64_t max_ahead_ = 0;  // communication thread only, read after the run
  int64_t fail_at_ = -1;
  bool identity_ = false;          // set before the run
  std::atomic<int64_t> calls_{0};  // SyncBucket calls

 private:
  const int depth_;
  const absl::Duration delay_;
  const CountingModel* const model_;
  int buckets_ = 0;
  absl::Mutex mu_;
  bool aborted_ = false;
};

inline std::unique_ptr<CountingModel> Model() {
  return std::make_unique<CountingModel>(*MakeCpuModel(MlpSpec{kWidths}));
}

}  // namespace training_testing
}  // namespace gradsync

#endif  // GRADSYNC_TESTS_TRAIN_TRAINING_LOOP_FAKES_H_
