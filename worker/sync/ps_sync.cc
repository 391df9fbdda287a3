#include "worker/sync/ps_sync.h"

#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "worker/sync/ps_client.h"
#include "worker/sync/ps_resume.h"

namespace gradsync {
namespace {

// The first pull also waits for rank 0's Init, which waits for rank 0 to
// reach it: allow the step timeout plus this.
constexpr absl::Duration kInitialPullSlack = absl::Seconds(30);

// Threading: as GradientSync. The PsClient is created once in Initialize;
// Abort may race with that, so the pointer is read under mu_.
class PsSync final : public GradientSync {
 public:
  PsSync(const JobOptions* job, const StallWatch* stall, const Env* env)
      : job_(*job), stall_(stall), env_(env) {}

  // 1. cut every bucket into partitions of <= partition_bytes (or of the
  //    picked size), round-robin over the shards (MakeJobPsLayout; one PS
  //    slice each);
  // 2. rank 0 installs its parameters and the shard config on every slice;
  // 3. every rank pulls the initial parameters.
  absl::Status Initialize(const std::vector<Range>& buckets, float* params) override {
    const std::vector<PsShardOptions>& shards = job_.ps_shards;
    if (shards.empty()) return absl::InvalidArgumentError("no PS shards");
    const PsLayout layout = MakeJobPsLayout(job_, buckets);
    partitions_of_bucket_ = layout.partitions_of_bucket;
    std::vector<PsPartitionRef> partitions =
        MakePsPartitionRefs(job_.job_id, shards, layout);
    PsClient* client;
    {
      absl::MutexLock lock(&mu_);
      client_ = std::make_unique<PsClient>(job_.rank, PsCredentialsOf(job_),
                                           std::move(partitions), job_.wire_dtype, stall_,
                                           env_);
      if (!aborted_.ok()) client_->Abort(aborted_);
      client = client_.get();
    }
    const absl::Time deadline = env_->Now() + job_.step_timeout + kInitialPullSlack;
    if (!job_.resume_from.empty()) {
      std::set<std::string> addresses;
      for (const PsShardOptions& s : shards) addresses.insert(s.address);
      // A listing is answered at once by a live shard: one silent for a
      // step timeout is lost, as it would be for a step (an elastic job's
      // generation then ends in that time, not the init's slack).
      absl::StatusOr<int64_t> step =
          FindResumeStep(job_.resume_from, addresses, PsCredentialsOf(job_),
                         env_->Now() + job_.step_timeout);
      if (!step.ok()) return step.status();
      start_step_ = *step;
    }
    if (job_.rank == 0) {
      absl::Status st = client->Init(params, ShardConfigOf(job_, start_step_), deadline);
      if (!st.ok()) return st;
    }
    return client->Pull(params, /*initial=*/true, deadline);
  }

  int64_t start_step() const override { return start_step_; }

  // A resumed async slice counts its pushes afresh, every rank at
  // start_step_ (PsSlice::Resume).
  int64_t JobPushesApplied() const override {
    if (!job_.job_wide_steps || job_.mode != SyncMode::kAsync) return -1;
    PsClient* c = client();
    return start_step_ * job_.world_size +
           (c == nullptr ? 0 : c->newest_push_reply_step());
  }

  absl::Status SyncBucket(int64_t step, int bucket, float* grad, float* params) override {
    if (bucket < 0 || bucket >= static_cast<int>(partitions_of_bucket_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no bucket ", bucket));
    }
    PsClient* c = client();
    if (c == nullptr) return absl::FailedPreconditionError("not initialised");
    return c->PushPull(step, grad, params, partitions_of_bucket_[bucket],
                       env_->Now() + job_.step_timeout, bucket);
  }

  // Async: every rank ends with the same parameters (the coordinator
  // compares their checksums), pulled once all ranks have pushed their last
  // step; the slowest rank may still be training, hence the slack.
  absl::Status Finish(float* params) override {
    if (job_.mode != SyncMode::kAsync) return absl::OkStatus();
    PsClient* c = client();
    if (c == nullptr) return absl::FailedPreconditionError("not initialised");
    return c->FinalPull(params, env_->Now() + job_.step_timeout + kInitialPullSlack);
  }

  void Abort(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    if (aborted_.ok()) aborted_ = status;
    if (client_) client_->Abort(status);
  }

  Output output() const override { return Output::kParameters; }
  int pipeline_depth() const override { return 0; }

 private:
  PsClient* client() const {
    absl::MutexLock lock(&mu_);
    return client_.get();
  }

  // Constant after construction.
  const JobOptions& job_;
  const StallWatch* const stall_;  // may be null
  const Env* const env_;
  // Set in Initialize, then constant (read by the communication thread only
  // after Initialize returned): bucket -> the indices of its partitions.
  std::vector<std::vector<int>> partitions_of_bucket_;
  int64_t start_step_ = 0;  // set in Initialize

  mutable absl::Mutex mu_;
  std::unique_ptr<PsClient> client_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<GradientSync> MakePsSync(const JobOptions* job, const StallWatch* stall,
                                         const Env* env) {
  if (env == nullptr) env = stall != nullptr ? stall->env() : Env::Default();
  return std::make_unique<PsSync>(job, stall, env);
}

}  // namespace gradsync
