#include "worker/sync/ps_sync.h"

#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/tensor_frame.h"
#include "common/spec/job_spec.h"
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
  PsSync(const v1::Assignment* a, const StallWatch* stall, const Env* env)
      : a_(*a), timeout_(StepTimeout(a->spec())), stall_(stall), env_(env) {}

  // 1. cut every bucket into partitions of <= partition_bytes, round-robin
  //    over the shards (common/ps_layout.h; one PS slice each);
  // 2. rank 0 installs its parameters and the shard config on every slice;
  // 3. every rank pulls the initial parameters.
  absl::Status Initialize(const std::vector<Range>& buckets, float* params) override {
    std::vector<v1::PsShardInfo> shards(a_.ps_shards().begin(), a_.ps_shards().end());
    if (shards.empty()) return absl::InvalidArgumentError("no PS shards");
    const PsLayout layout = MakePsLayout(buckets, static_cast<int>(shards.size()),
                                         shards[0].partition_bytes());
    pieces_of_bucket_ = layout.partitions_of_bucket;
    std::vector<PsPiece> pieces = MakePsPieces(a_.job_id(), shards, layout);
    PsClient* client;
    {
      absl::MutexLock lock(&mu_);
      client_ = std::make_unique<PsClient>(
          a_.rank(), PsCredentialsOf(a_), std::move(pieces),
          WireDtypeOf(a_.spec().wire_dtype()).value_or(WireDtype::kFp32), stall_, env_);
      if (!aborted_.ok()) client_->Abort(aborted_);
      client = client_.get();
    }
    const absl::Time deadline = env_->Now() + timeout_ + kInitialPullSlack;
    v1::ShardConfig config = ShardConfigOf(a_);
    if (!a_.spec().resume_from().empty()) {
      std::set<std::string> addresses;
      for (const v1::PsShardInfo& s : shards) addresses.insert(s.address());
      absl::StatusOr<int64_t> step = FindResumeStep(a_.spec().resume_from(), addresses,
                                                    PsCredentialsOf(a_), deadline);
      if (!step.ok()) return step.status();
      start_step_ = *step;
      config.set_resume_from(a_.spec().resume_from());
      config.set_resume_step(*step);
    }
    if (a_.rank() == 0) {
      absl::Status st = client->Init(params, config, deadline);
      if (!st.ok()) return st;
    }
    return client->Pull(params, /*initial=*/true, deadline);
  }

  int64_t start_step() const override { return start_step_; }

  absl::Status SyncBucket(int64_t step, int bucket, float* grad, float* params) override {
    if (bucket < 0 || bucket >= static_cast<int>(pieces_of_bucket_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no bucket ", bucket));
    }
    PsClient* c = client();
    if (c == nullptr) return absl::FailedPreconditionError("not initialised");
    return c->PushPull(step, grad, params, pieces_of_bucket_[bucket],
                       env_->Now() + timeout_, bucket);
  }

  // Async: every rank ends with the same parameters (the coordinator
  // compares their checksums), pulled once all ranks have pushed their last
  // step; the slowest rank may still be training, hence the slack.
  absl::Status Finish(float* params) override {
    if (a_.spec().mode() != v1::SYNC_MODE_ASYNC) return absl::OkStatus();
    PsClient* c = client();
    if (c == nullptr) return absl::FailedPreconditionError("not initialised");
    return c->FinalPull(params, env_->Now() + timeout_ + kInitialPullSlack);
  }

  void Abort(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    if (aborted_.ok()) aborted_ = status;
    if (client_) client_->Abort(status);
  }

  Output output() const override { return Output::kParameters; }
  int pipeline_depth() const override { return 0; }

 private:
  static v1::ShardConfig ShardConfigOf(const v1::Assignment& a) {
    const v1::JobSpec& spec = a.spec();
    v1::ShardConfig c;
    c.set_world_size(a.world_size());
    c.set_mode(spec.mode());
    c.set_staleness(spec.has_staleness() ? spec.staleness() : -1);
    c.set_optimizer(spec.optimizer());
    c.set_lr(spec.lr());
    c.set_momentum(spec.momentum());
    c.set_checkpoint_every(spec.checkpoint_every());
    return c;
  }

  PsClient* client() {
    absl::MutexLock lock(&mu_);
    return client_.get();
  }

  // Constant after construction.
  const v1::Assignment& a_;
  const absl::Duration timeout_;
  const StallWatch* const stall_;  // may be null
  const Env* const env_;
  // Set in Initialize, then constant (read by the communication thread only
  // after Initialize returned): bucket -> its partitions (= piece indices).
  std::vector<std::vector<int>> pieces_of_bucket_;
  int64_t start_step_ = 0;  // set in Initialize

  absl::Mutex mu_;
  std::unique_ptr<PsClient> client_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<GradientSync> MakePsSync(const v1::Assignment* assignment,
                                         const StallWatch* stall, const Env* env) {
  if (env == nullptr) env = stall != nullptr ? stall->env() : Env::Default();
  return std::make_unique<PsSync>(assignment, stall, env);
}

}  // namespace gradsync
