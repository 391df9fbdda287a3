#include "worker/sync/allreduce_sync.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/kernels.h"
#include "common/spec/job_limits.h"
#include "worker/collectives/allreduce_factory.h"
#include "worker/collectives/hierarchical.h"
#include "worker/collectives/ring.h"
#include "worker/collectives/transport.h"
#include "worker/sync/allreduce_checkpoint.h"

namespace gradsync {
namespace {

// The initial broadcast waits for every rank to reach it: allow the step
// timeout plus this.
constexpr absl::Duration kBroadcastSlack = absl::Seconds(10);

// Threading: as GradientSync. The per-bucket allreduce objects are built in
// Initialize and used by the communication thread afterwards.
class AllreduceSync final : public GradientSync {
 public:
  AllreduceSync(const JobOptions* job, Transport* t, const TuningTable* tuning,
                const Env* env)
      : job_(*job),
        transport_(t),
        tuning_(tuning),
        env_(env),
        depth_(job->mode == SyncMode::kAsync
                   ? job->staleness.value_or(kDefaultAllreduceAsyncStaleness)
                   : 0) {}

  // 1. one Allreduce per bucket (MakeAllreduce(job.algorithm): auto
  //    chooses by the bucket's size), built once with its buffer's size;
  // 2. the checkpointer, when the job checkpoints or resumes;
  // 3. rank 0's parameters are broadcast around the ring;
  // 4. resuming: every rank loads the newest complete checkpoint of
  //    job.resume_from from PS shard 0 (parameters into `params`, the
  //    optimizer state kept for the training loop) and starts at its step.
  absl::Status Initialize(const std::vector<Range>& buckets, float* params) override {
    buckets_ = buckets;
    allreduces_.clear();
    size_t n = 0;
    AllreduceOptions options = AllreduceOptionsFor(job_, tuning_);
    options.env = env_;
    for (const Range& r : buckets) {
      absl::StatusOr<std::unique_ptr<Allreduce>> algo =
          MakeAllreduce(job_.algorithm, transport_, r.size, options);
      if (!algo.ok()) return algo.status();
      allreduces_.push_back(std::move(*algo));
      n = std::max<size_t>(n, r.begin + r.size);
    }
    absl::Status st = MakeCheckpointer();
    if (st.ok()) {
      st = RingBroadcast(transport_, params, n, /*root=*/0, job_.chunk_bytes,
                         env_->Now() + job_.step_timeout + kBroadcastSlack);
    }
    if (st.ok() && !job_.resume_from.empty()) st = Restore(params, n);
    return st;
  }

  int64_t start_step() const override { return start_step_; }
  AllreduceCheckpointer* checkpointer() override {
    absl::MutexLock lock(&mu_);
    return checkpointer_.get();
  }

  absl::Status SyncBucket(int64_t step, int bucket, float* grad, float*) override {
    if (bucket < 0 || bucket >= static_cast<int>(allreduces_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no bucket ", bucket));
    }
    const Range& r = buckets_[bucket];
    absl::Status st = allreduces_[bucket]->Run(grad + r.begin, step, bucket);
    if (!st.ok()) return st;
    Scale(grad + r.begin, 1.0f / transport_->size(), r.size);
    return absl::OkStatus();
  }

  absl::Status Finish(float*) override { return absl::OkStatus(); }
  void Abort(const absl::Status& status) override {
    transport_->Abort(status);
    absl::MutexLock lock(&mu_);
    if (checkpointer_) checkpointer_->Abort(status);
  }
  Output output() const override { return Output::kAveragedGradient; }
  int pipeline_depth() const override { return depth_; }
  // One rank: the allreduce moves nothing and the scale is 1.
  bool identity() const override { return transport_->size() == 1; }
  std::vector<AllreduceAlgorithm> bucket_algorithms() const override {
    std::vector<AllreduceAlgorithm> out;
    for (const auto& algo : allreduces_) out.push_back(algo->algorithm());
    return out;
  }

 private:
  // Constant after construction.
  const JobOptions& job_;
  Transport* const transport_;
  const TuningTable* const tuning_;  // may be null: the built-in table
  const Env* const env_;
  const int depth_;
  // Set in Initialize, then used by the communication thread only.
  std::vector<Range> buckets_;
  std::vector<std::unique_ptr<Allreduce>> allreduces_;  // one per bucket
  int64_t start_step_ = 0;                              // set in Initialize
  // Set in Initialize (Abort may race with that), then constant.
  absl::Mutex mu_;
  std::unique_ptr<AllreduceCheckpointer> checkpointer_ ABSL_GUARDED_BY(mu_);

  // Checkpoints (job.checkpoint_every or resume_from) go to the first PS
  // shard of the job; rank 0 saves.
  absl::Status MakeCheckpointer() {
    if (job_.checkpoint_every <= 0 && job_.resume_from.empty()) {
      return absl::OkStatus();
    }
    if (job_.ps_shards.empty()) {
      return absl::FailedPreconditionError(
          "allreduce checkpoints: the assignment names no PS shard to keep them");
    }
    auto c = std::make_unique<AllreduceCheckpointer>(
        std::make_unique<AllreduceCheckpointClient>(job_.ps_shards[0].address,
                                                    PsCredentialsOf(job_)),
        job_.job_id, job_.checkpoint_every, job_.rank == 0,
        job_.step_timeout + kBroadcastSlack, env_);
    absl::MutexLock lock(&mu_);
    checkpointer_ = std::move(c);
    return absl::OkStatus();
  }

  // Every rank loads the newest complete checkpoint of job.resume_from
  // into `params` (the optimizer state stays in checkpointer_->restored()).
  absl::Status Restore(float* params, size_t n) {
    AllreduceCheckpointer* c = checkpointer();
    absl::StatusOr<int64_t> step = c->Restore(job_.resume_from, n);
    if (!step.ok()) return step.status();
    std::copy(c->restored()->params.begin(), c->restored()->params.end(), params);
    start_step_ = *step;
    return absl::OkStatus();
  }
};

}  // namespace

AllreduceOptions AllreduceOptionsFor(const JobOptions& job, const TuningTable* tuning) {
  AllreduceOptions o;
  o.segment_bytes = job.chunk_bytes;
  o.timeout = job.step_timeout;
  o.tuning = tuning;
  o.groups = job.groups.empty() ? GroupsByHost(job.peer_addresses) : job.groups;
  return o;
}

std::unique_ptr<GradientSync> MakeAllreduceSync(const JobOptions* job,
                                                Transport* transport,
                                                const TuningTable* tuning,
                                                const Env* env) {
  return std::make_unique<AllreduceSync>(job, transport, tuning, env);
}

}  // namespace gradsync
