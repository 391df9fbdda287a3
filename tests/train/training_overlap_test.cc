// The training loop's timing with sleeping fakes: communication runs beside
// computation up to the pipeline depth, and host work beside the device's
// without lock-step. Each measurement is the best of three (sleeps only
// overshoot on a loaded machine).
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
#include "tests/train/training_loop_fakes.h"
#include "worker/model/device_model.h"
#include "worker/train/trainer.h"

namespace gradsync {
namespace training_testing {
namespace {

class SleepyModel final : public DeviceModel {
 public:
  SleepyModel(int layers, absl::Duration compute) : layers_(layers), compute_(compute) {}
  std::string name() const override { return "sleepy"; }
  size_t num_params() const override { return 16 * layers_; }
  int num_layers() const override { return layers_; }
  Range LayerRange(int l) const override { return Range{16u * l, 16}; }
  absl::Status Configure(const std::vector<Range>& b, const OptimizerOptions&,
                         int) override {
    buckets_ = static_cast<int>(b.size());
    return absl::OkStatus();
  }
  absl::Status SetParams(const float*) override { return absl::OkStatus(); }
  absl::Status SetParamsRange(Range, const float*) override { return absl::OkStatus(); }
  absl::Status GetParams(float* h) override {
    std::fill_n(h, num_params(), 0.0f);
    return absl::OkStatus();
  }
  absl::Status StageBatch(const float*, const uint8_t*, int) override {
    return absl::OkStatus();
  }
  absl::Status ForwardBackward(int, const std::function<void(int)>& ready) override {
    for (int b = 0; b < buckets_; ++b) {
      absl::SleepFor(compute_ / buckets_);
      ready(b);
    }
    ++pending_;
    return absl::OkStatus();
  }
  absl::StatusOr<float> TakeLoss() override {
    if (pending_ == 0) return absl::FailedPreconditionError("no loss");
    --pending_;
    return 0.5f;
  }
  absl::Status StartGradCopy(int, int, float*) override { return absl::OkStatus(); }
  absl::Status WaitGradCopy(int, int) override { return absl::OkStatus(); }
  absl::Status ApplyGradient(int, const float*) override { return absl::OkStatus(); }
  absl::Status ApplyOwnGradient(int) override { return absl::OkStatus(); }
  absl::StatusOr<EvalResult> Evaluate(const float*, const uint8_t*, int64_t) override {
    return EvalResult{};
  }
  absl::StatusOr<std::shared_ptr<float>> AllocHost(size_t n) override {
    return std::shared_ptr<float>(new float[n](), std::default_delete<float[]>());
  }

 private:
  const int layers_;
  const absl::Duration compute_;
  int buckets_ = 0;
  int pending_ = 0;
};

// One rank, `steps` steps, one bucket per 16-float layer of the fake models
// below (their layer widths only matter for the input width check).
JobOptions TimingAssignment(int steps) {
  JobOptions a;
  a.job_id = "timing";
  a.world_size = 1;
  a.layer_widths = {kFeatures, 1};
  a.batch_size = 1;
  a.steps = steps;
  a.optimizer = {OptimizerKind::kSgd, /*lr=*/0, /*momentum=*/0};
  a.bucket_bytes = 64;
  return a;
}

// Seconds per step of a 32-step run (pipeline fill and drain amortised).
double TimedRun(DeviceModel* model, GradientSync* sync) {
  constexpr int kSteps = 32;
  Quiet q;
  TrainingOptions o;
  o.evaluate = false;
  TrainingOutcome out = RunTraining(TimingAssignment(kSteps), TinyData(8), Dataset{},
                                    model, sync, &q, nullptr, o);
  EXPECT_TRUE(out.status.ok()) << out.status;
  return out.done.wall_seconds / kSteps;
}

// The least of three measurements: sleeps overshoot on a loaded machine
// (a parallel build, other tests), never undershoot, so the minimum is the
// closest to what the loop's structure allows. A loop that really does not
// overlap is slow in all three.
template <typename Fn>
double BestOfThree(Fn measure) {
  double best = measure();
  for (int i = 0; i < 2; ++i) best = std::min(best, measure());
  return best;
}

// Seconds per step of a run where backward takes C and synchronising a
// step's buckets takes M in all.
double SecondsPerStep(int depth, absl::Duration c, absl::Duration m) {
  constexpr int kLayers = 4;
  SleepyModel model(kLayers, c);
  SlowSync sync(depth, m / kLayers, nullptr);
  return TimedRun(&model, &sync);
}

TEST(TrainingLoop, CommunicationOverlapsComputation) {
  const absl::Duration c = absl::Milliseconds(40), m = absl::Milliseconds(40);
  const double ms = absl::ToDoubleSeconds(m);
  // Baseline from the same run: the step with (almost) no communication, so
  // that sleep overshoot on a loaded machine is not counted as exposure.
  const double compute =
      BestOfThree([&] { return SecondsPerStep(1, c, absl::ZeroDuration()); });
  // Pipelined steps (ring async): a step costs max(C, M), not C + M.
  const double async_step = BestOfThree([&] { return SecondsPerStep(1, c, m); });
  EXPECT_LE(async_step, 1.1 * std::max(compute, ms));
  // One step at a time (sync): buckets are synchronised while backward
  // still runs, so only the last bucket's share of M is exposed.
  const double sync_step = BestOfThree([&] { return SecondsPerStep(0, c, m); });
  EXPECT_LE(sync_step, 1.1 * (compute + ms / 4));
  EXPECT_GE(sync_step, compute + ms / 4 * 0.9);  // it cannot hide more: can fail
  std::printf(
      "C = M = 40 ms: compute alone %.1f ms per step, pipelined %.1f, "
      "sync %.1f\n",
      1e3 * compute, 1e3 * async_step, 1e3 * sync_step);
}

// A GPU-like model: ForwardBackward, copies and optimizer steps are tasks on
// one in-order "stream" run by a device thread (compute takes `compute` per
// step); the host only waits in TakeLoss / WaitGradCopy. Staging a batch
// costs the host `stage` (gather + pinned copy), as on a real machine.
class StreamModel final : public DeviceModel {
 public:
  StreamModel(int layers, absl::Duration compute, absl::Duration stage)
      : layers_(layers), compute_(compute), stage_(stage), device_([this] { Run(); }) {}
  ~StreamModel() override {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    device_.join();
  }
  std::string name() const override { return "stream"; }
  size_t num_params() const override { return 16 * layers_; }
  int num_layers() const override { return layers_; }
  Range LayerRange(int l) const override { return Range{16u * l, 16}; }
  absl::Status Configure(const std::vector<Range>& b, const OptimizerOptions&,
                         int slots) override {
    buckets_ = static_cast<int>(b.size());
    slots_ = slots;
    absl::MutexLock lock(&mu_);
    copy_ticket_.assign(buckets_ * slots, 0);
    return absl::OkStatus();
  }
  absl::Status SetParams(const float*) override { return Drain(); }
  absl::Status SetParamsRange(Range, const float*) override {
    Enqueue(absl::ZeroDuration());
    return absl::OkStatus();
  }
  absl::Status GetParams(float* h) override {
    std::fill_n(h, num_params(), 0.0f);
    return Drain();
  }
  absl::Status StageBatch(const float*, const uint8_t*, int) override {
    absl::SleepFor(stage_);
    return absl::OkStatus();
  }
  absl::Status ForwardBackward(int, const std::function<void(int)>& ready) override {
    for (int b = 0; b < buckets_; ++b) {
      Enqueue(compute_ / buckets_);
      ready(b);
    }
    losses_.push_back(Enqueue(absl::ZeroDuration()));
    return absl::OkStatus();
  }
  absl::StatusOr<float> TakeLoss() override {
    if (losses_.empty()) return absl::FailedPreconditionError("no loss");
    WaitFor(losses_.front());
    losses_.pop_front();
    return 0.5f;
  }
  absl::Status StartGradCopy(int b, int slot, float*) override {
    const int64_t t = Enqueue(absl::ZeroDuration());
    absl::MutexLock lock(&mu_);
    copy_ticket_[b * slots_ + slot] = t;
    return absl::OkStatus();
  }
  absl::Status WaitGradCopy(int b, int slot) override {
    int64_t t;
    {
      absl::MutexLock lock(&mu_);
      t = copy_ticket_[b * slots_ + slot];
    }
    WaitFor(t);
    return absl::OkStatus();
  }
  absl::Status ApplyGradient(int, const float*) override {
    Enqueue(absl::ZeroDuration());
    return absl::OkStatus();
  }
  absl::Status ApplyOwnGradient(int) override {
    Enqueue(absl::ZeroDuration());
    return absl::OkStatus();
  }
  absl::StatusOr<EvalResult> Evaluate(const float*, const uint8_t*, int64_t) override {
    absl::Status st = Drain();
    if (!st.ok()) return st;
    return EvalResult{};
  }
  absl::StatusOr<std::shared_ptr<float>> AllocHost(size_t n) override {
    return std::shared_ptr<float>(new float[n](), std::default_delete<float[]>());
  }

 private:
  // Queues a task that takes `d` on the device; returns its ticket.
  int64_t Enqueue(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(d);
    return ++enqueued_;
  }
  void WaitFor(int64_t ticket) {
    absl::MutexLock lock(&mu_);
    auto done = [this, ticket]()
                    ABSL_NO_THREAD_SAFETY_ANALYSIS { return completed_ >= ticket; };
    mu_.Await(absl::Condition(&done));
  }
  absl::Status Drain() {
    int64_t t;
    {
      absl::MutexLock lock(&mu_);
      t = enqueued_;
    }
    WaitFor(t);
    return absl::OkStatus();
  }
  void Run() {
    while (true) {
      absl::Duration d;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return stop_ || !tasks_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (tasks_.empty()) return;
        d = tasks_.front();
        tasks_.pop_front();
      }
      if (d > absl::ZeroDuration()) absl::SleepFor(d);
      absl::MutexLock lock(&mu_);
      ++completed_;
    }
  }

  const int layers_;
  const absl::Duration compute_, stage_;
  int buckets_ = 0, slots_ = 1;
  std::deque<int64_t> losses_;  // training thread only
  absl::Mutex mu_;
  std::deque<absl::Duration> tasks_ ABSL_GUARDED_BY(mu_);
  int64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> copy_ticket_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread device_;  // last: starts after the members above exist
};

double StreamSecondsPerStep(absl::Duration stage) {
  StreamModel model(4, absl::Milliseconds(30), stage);
  SlowSync sync(/*depth=*/1, absl::Milliseconds(1), nullptr);
  return TimedRun(&model, &sync);
}

TEST(TrainingLoop, HostWorkOverlapsTheDeviceWithoutLockStep) {
  // The host stages the next batch and reads the previous loss while the
  // device computes, and never waits for a step's copies before enqueueing
  // the next: host work of 20 ms per step hides behind 30 ms of device work.
  // In lock-step (wait for step t, then stage t+1) a step would take 50 ms.
  const double device_only =
      BestOfThree([] { return StreamSecondsPerStep(absl::ZeroDuration()); });
  const double with_host =
      BestOfThree([] { return StreamSecondsPerStep(absl::Milliseconds(20)); });
  std::printf(
      "device 30 ms/step: %.1f ms per step alone, %.1f with 20 ms of "
      "host work\n",
      1e3 * device_only, 1e3 * with_host);
  EXPECT_LE(with_host, 1.15 * device_only);
}

// A sync that is the identity (one rank) lets the loop apply each gradient
// where backward left it, without copies or SyncBucket, and the parameters
// come out bit for bit as through the copies; with depth 1 the loop still
// goes through SyncBucket (the model holds one step's gradient only).

}  // namespace
}  // namespace training_testing
}  // namespace gradsync
