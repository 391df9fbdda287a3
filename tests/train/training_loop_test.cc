// The one training loop (worker/train/trainer.h) with a fake GradientSync:
// how far computation runs ahead of synchronisation, and failure paths.
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
namespace {

constexpr int kFeatures = 8;
const std::vector<int> kWidths = {kFeatures, 6, 3};

class Quiet : public TrainingReporter {
 public:
  void Progress(const ProgressReport&) override {}
  void EpochDone(const EpochReport&) override {}
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

JobOptions OneRank(int steps) {
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
    TrainingOutcome out =
        RunTraining(OneRank(12), data, Dataset{}, model.get(), &sync, &q, nullptr, o);
    ASSERT_TRUE(out.status.ok()) << out.status;
    // Step t + depth + 1 never computes before step t is applied...
    EXPECT_LE(sync.max_ahead_, depth) << "depth " << depth;
    // ...and with slow communication the loop does use the slack.
    EXPECT_EQ(sync.max_ahead_, depth) << "depth " << depth;
    EXPECT_GT(out.done.comm_seconds, 0);
    EXPECT_EQ(out.done.steps, 12);
  }
}

// A "sync" whose every bucket takes `delay` on a fake clock (it sleeps on
// the Env, which moves the clock and returns at once).
class FakeClockSync final : public GradientSync {
 public:
  FakeClockSync(const Env* env, absl::Duration delay) : env_(env), delay_(delay) {}
  absl::Status Initialize(const std::vector<Range>&, float*) override {
    return absl::OkStatus();
  }
  absl::Status SyncBucket(int64_t, int, float*, float*) override {
    ++calls_;
    env_->SleepFor(delay_);
    return absl::OkStatus();
  }
  absl::Status Finish(float*) override { return absl::OkStatus(); }
  void Abort(const absl::Status&) override {}
  Output output() const override { return Output::kAveragedGradient; }
  int pipeline_depth() const override { return 0; }

  std::atomic<int64_t> calls_{0};

 private:
  const Env* const env_;
  const absl::Duration delay_;
};

// The loop's timers read TrainingOptions::env: an hour of fake
// communication per bucket shows as hours of wall time in a run that takes
// milliseconds of real time; nothing else moved the clock.
TEST(TrainingLoop, TimersReadTheEnv) {
  FakeEnv env;
  const Dataset data = TinyData(64);
  auto model = Model();
  FakeClockSync sync(&env, absl::Hours(1));
  Quiet q;
  TrainingOptions o;
  o.evaluate = false;
  o.env = &env;
  const absl::Time real0 = absl::Now();
  TrainingOutcome out =
      RunTraining(OneRank(6), data, Dataset{}, model.get(), &sync, &q, nullptr, o);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_LT(absl::Now() - real0, absl::Minutes(1));
  ASSERT_GT(sync.calls_.load(), 0);
  EXPECT_EQ(out.done.wall_seconds,
            absl::ToDoubleSeconds(sync.calls_.load() * absl::Hours(1)));
  EXPECT_GE(out.done.comm_seconds, 3600.0);
}

// A model whose backward takes `compute` in `layers` equal parts, announcing
// one bucket per layer as it goes (as a GPU's events would), with no math.
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
  absl::StatusOr<Mlp::Eval> Evaluate(const float*, const uint8_t*, int64_t) override {
    return Mlp::Eval{};
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
  absl::StatusOr<Mlp::Eval> Evaluate(const float*, const uint8_t*, int64_t) override {
    absl::Status st = Drain();
    if (!st.ok()) return st;
    return Mlp::Eval{};
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
TEST(TrainingLoop, OneRankAppliesItsOwnGradientBitForBit) {
  constexpr int kSteps = 25;
  const Dataset data = TinyData(64);
  for (OptimizerKind opt : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
    SCOPED_TRACE(opt == OptimizerKind::kAdam ? "adam" : "sgd");
    JobOptions a = OneRank(kSteps);
    a.optimizer.kind = opt;
    // One run with a sync of pipeline depth `depth`; its SyncBucket calls.
    auto run = [&](int depth, bool identity, int64_t* calls) {
      auto model = Model();
      SlowSync sync(depth, absl::ZeroDuration(), nullptr);
      sync.identity_ = identity;
      Quiet q;
      TrainingOutcome out =
          RunTraining(a, data, Dataset{}, model.get(), &sync, &q, nullptr);
      *calls = sync.calls_;
      return out;
    };
    int64_t copied_calls = 0, own_calls = 0, stale_calls = 0;
    const TrainingOutcome copied = run(0, false, &copied_calls);
    ASSERT_TRUE(copied.status.ok()) << copied.status;
    const int64_t buckets = static_cast<int64_t>(copied.done.bucket_bytes.size());
    ASSERT_GT(buckets, 1);
    EXPECT_EQ(copied_calls, kSteps * buckets);

    const TrainingOutcome own = run(0, true, &own_calls);
    ASSERT_TRUE(own.status.ok()) << own.status;
    EXPECT_EQ(own.done.steps, kSteps);
    EXPECT_EQ(own_calls, 0);
    EXPECT_EQ(own.done.comm_seconds, 0.0);
    ASSERT_EQ(own.params.size(), copied.params.size());
    EXPECT_EQ(0, std::memcmp(own.params.data(), copied.params.data(),
                             own.params.size() * sizeof(float)));

    const TrainingOutcome stale = run(1, true, &stale_calls);
    ASSERT_TRUE(stale.status.ok()) << stale.status;
    EXPECT_EQ(stale_calls, kSteps * buckets);
  }
}

TEST(TrainingLoop, ASyncFailureEndsTheRunWithItsStatus) {
  const Dataset data = TinyData(64);
  auto model = Model();
  SlowSync sync(1, absl::Milliseconds(1), model.get());
  sync.fail_at_ = 5;
  Quiet q;
  const absl::Time t0 = absl::Now();
  TrainingOutcome out =
      RunTraining(OneRank(1000), data, Dataset{}, model.get(), &sync, &q, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(out.status)) << out.status;
  EXPECT_EQ(out.done.code, absl::StatusCode::kUnavailable);
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
  TrainingOutcome out =
      RunTraining(OneRank(1000), data, Dataset{}, model.get(), &sync, &q, &cancelled);
  canceller.join();
  EXPECT_TRUE(absl::IsCancelled(out.status)) << out.status;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
}

TEST(TrainingLoop, BadAssignmentsFailTheJobNotTheProcess) {
  const Dataset data = TinyData(64);
  auto model = Model();
  SlowSync sync(0, absl::ZeroDuration(), model.get());
  Quiet q;
  JobOptions a = OneRank(3);
  a.layer_widths = {kFeatures};
  TrainingOutcome out = RunTraining(a, data, Dataset{}, model.get(), &sync, &q, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(out.status)) << out.status;
  a = OneRank(3);
  a.num_params += 1;
  out = RunTraining(a, data, Dataset{}, model.get(), &sync, &q, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(out.status)) << out.status;
}

}  // namespace
}  // namespace gradsync
