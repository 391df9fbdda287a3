// The one training loop (worker/train/trainer.h) with a fake GradientSync:
// how far computation runs ahead of synchronisation, and failure paths. Its
// timing (communication beside computation, host beside device) is in
// training_overlap_test.cc.
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
// Job-wide steps (ps async): a sync that says the other ranks pushed
// `others` times per step of this rank, as a PS's answers would.
class JobWideSync final : public GradientSync {
 public:
  explicit JobWideSync(int others) : others_(others) {}
  absl::Status Initialize(const std::vector<Range>& b, float*) override {
    buckets_ = static_cast<int>(b.size());
    return absl::OkStatus();
  }
  absl::Status SyncBucket(int64_t, int bucket, float*, float*) override {
    if (bucket == buckets_ - 1) pushes_ += 1 + others_;
    return absl::OkStatus();
  }
  absl::Status Finish(float*) override { return absl::OkStatus(); }
  void Abort(const absl::Status&) override {}
  Output output() const override { return Output::kAveragedGradient; }
  int pipeline_depth() const override { return 0; }
  int64_t JobPushesApplied() const override { return pushes_.load(); }

 private:
  const int others_;
  int buckets_ = 0;
  std::atomic<int64_t> pushes_{0};
};

class Recording : public TrainingReporter {
 public:
  void Progress(const ProgressReport& p) override { progress.push_back(p); }
  void EpochDone(const EpochReport& e) override { epochs.push_back(e); }
  std::vector<ProgressReport> progress;
  std::vector<EpochReport> epochs;
};

// Rank 0 of 3 whose peers push 5 (then 11) times per step of its own: the
// job's 10 steps (30 pushes) are spent after 5 (then 3) of its steps; each
// epoch (2 job steps: 24 samples, global batch 12) is reported once, at the
// first step that sees the job past its end, with that job step; and the
// last step reports the epochs left.
TEST(TrainingLoop, JobWideStepsEndWhenThePushesAreSpent) {
  const Dataset data = TinyData(24);
  const Dataset test = TinyData(6);
  struct Case {
    int others;
    int64_t steps_run;
    std::vector<int64_t> epoch_job_steps;
  };
  for (const Case& c : {Case{5, 5, {2, 4, 6, 8, 10}}, Case{11, 3, {4, 4, 8, 8, 10}}}) {
    SCOPED_TRACE(c.others);
    JobOptions a = OneRank(10);
    a.world_size = 3;
    a.job_wide_steps = true;
    auto model = Model();
    JobWideSync sync(c.others);
    Recording r;
    TrainingOutcome out = RunTraining(a, data, test, model.get(), &sync, &r, nullptr);
    ASSERT_TRUE(out.status.ok()) << out.status;
    EXPECT_EQ(out.done.steps, c.steps_run);
    EXPECT_EQ(out.done.samples, c.steps_run * 4);
    ASSERT_EQ(r.epochs.size(), 5u);
    for (size_t e = 0; e < r.epochs.size(); ++e) {
      EXPECT_EQ(r.epochs[e].epoch, static_cast<int>(e) + 1);
      EXPECT_EQ(r.epochs[e].job_step, c.epoch_job_steps[e]) << "epoch " << e + 1;
      EXPECT_GE(r.epochs[e].test_accuracy, 0) << "rank 0 evaluates";
    }
    ASSERT_FALSE(r.progress.empty());
    EXPECT_EQ(r.progress.back().step, c.steps_run);
    EXPECT_EQ(r.progress.back().job_step, 10);
    EXPECT_EQ(r.progress.back().total_steps, 10);
  }
}

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
}  // namespace training_testing
}  // namespace gradsync
