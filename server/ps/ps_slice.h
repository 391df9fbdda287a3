// One independently synchronised slice of a job's parameters on a PS shard
// (a partition of common/ps_layout.h, or any slice a client keys on its own):
// its parameters, its optimizer, and the sync (BSP) / async (ASGD, SSP) rules,
// behind a lock of its own so that slices of one job reduce in parallel.
//
// No gRPC and no threads in here. Methods never wait and never run a Reply:
// replies they complete are appended to a PsCompletions list that the caller
// runs (RunCompletions) after the method returned, i.e. with no lock held.
//
// Thread-safe: every method may be called concurrently.
#ifndef GRADSYNC_SERVER_PS_PS_SLICE_H_
#define GRADSYNC_SERVER_PS_PS_SLICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/checkpoint.h"
#include "common/optimizer.h"

namespace gradsync {

struct ShardJobConfig {
  int world_size = 1;
  bool async = false;
  int staleness = -1;  // async: SSP bound; < 0 = unbounded
  OptimizerOptions optimizer;
  // Checkpoints (common/checkpoint.h), 0 = none; set by PsStore. The slice
  // writes CheckpointFile(checkpoint_dir, piece, t) labelled `key` and
  // removes its file of step t - 2k (the last two stay):
  //  - sync: after every step t with t % checkpoint_every == 0, before it
  //    answers step t's pushes;
  //  - async (no global step): when the slowest rank's count of pushes to
  //    this slice reaches a new multiple t of checkpoint_every, after
  //    applying the push that got it there. The file holds every push
  //    applied so far: all ranks' first t steps and the faster ranks' later
  //    ones. A slice resumed from it lets every rank continue at step t.
  int64_t checkpoint_every = 0;
  // Also write one at the slice's first step (0, or the resumed step) when
  // it is made: an elastic generation is resumable from its start on.
  bool checkpoint_at_start = false;
  std::string checkpoint_dir;
  std::string piece;  // "p3" of key "j-1/p3"
  std::string key;
  const Env* env = Env::Default();  // the checkpoint files' (PsStore's Env)
  // Resuming: the checkpoint of job `resume_from` at `resume_step` replaces
  // the INIT values (PsStore::Init loads it).
  std::string resume_from;
  int64_t resume_step = 0;
};

// Parameters handed out: an immutable snapshot, shared with in-flight sends.
using ParamSnapshot = std::shared_ptr<const std::vector<float>>;

struct PsReply {
  ParamSnapshot params;
  int64_t step = 0;  // steps applied so far (sync) / pushes applied (async)
};

using Reply = std::function<void(absl::StatusOr<PsReply>)>;

struct PsCompletion {
  Reply reply;
  absl::StatusOr<PsReply> result;
};
using PsCompletions = std::vector<PsCompletion>;

// Runs and clears `done`. Call with no lock held.
void RunCompletions(PsCompletions* done);

class PsSlice {
 public:
  // INVALID_ARGUMENT on a bad config or optimizer. Async jobs scale the
  // learning rate by 1/world_size (see the .cc).
  static absl::StatusOr<std::unique_ptr<PsSlice>> Create(const ShardJobConfig& config,
                                                         std::vector<float> initial);
  // A slice that continues from `from` (its parameters, optimizer state and
  // step; Pull(initial) returns these). INVALID_ARGUMENT as Create, or when
  // the optimizer state does not fit the config's optimizer.
  static absl::StatusOr<std::unique_ptr<PsSlice>> Resume(const ShardJobConfig& config,
                                                         Checkpoint from);

  PsSlice(const PsSlice&) = delete;
  PsSlice& operator=(const PsSlice&) = delete;

  // Writes the checkpoint of the slice's first step now (config
  // checkpoint_at_start; PsStore calls it once, before the slice is seen).
  absl::Status CheckpointStart();

  // The current parameters (with the step: sync steps applied / async pushes
  // applied), or the initial ones (step 0, or the resumed step) when
  // `initial`; the End status once ended.
  absl::StatusOr<PsReply> Pull(bool initial);

  // Push of `rank`'s gradient for `step`; `accumulate(dst)` must add the
  // `count` received floats into dst. It runs under this slice's lock
  // only, at once: a sync push is reduced as it arrives, not kept for later.
  //  1. Ended -> the End status; count != size() or rank out of range ->
  //     INVALID_ARGUMENT.
  //  2. sync: step must be the step being reduced and the rank must not have
  //     pushed it yet, else FAILED_PRECONDITION (nothing is summed). The push
  //     is added into the step's sum (in arrival order); the N-th push
  //     averages the sum, applies the optimizer once, writes a checkpoint
  //     when one is due (under this slice's lock: no push for the next step
  //     can come before the replies), and completes all N replies with the
  //     new parameters. A failed checkpoint ends the slice with its error.
  //  3. async: step must equal the rank's count of earlier pushes (a
  //     resumed slice counts from its checkpoint's step), else
  //     FAILED_PRECONDITION. The gradient is applied at once (learning rate
  //     lr/N), then a checkpoint is written when one is due (a failed one
  //     ends the slice); the reply is held while the rank would be more than
  //     `staleness` steps ahead of the slowest rank (SSP), then carries the
  //     newest parameters.
  // Errors complete `reply` through `done` as well.
  void Push(int64_t step, int rank, size_t count,
            absl::FunctionRef<void(float*)> accumulate, Reply reply, PsCompletions* done);

  // Push, for a thread that must never wait (a gRPC reaction): false, with
  // nothing done and `*reply` untouched, when another thread holds the
  // slice's lock or the slice writes checkpoints (their fsync); else Push
  // with std::move(*reply), and true.
  bool TryPush(int64_t step, int rank, size_t count,
               absl::FunctionRef<void(float*)> accumulate, Reply* reply,
               PsCompletions* done) ABSL_LOCKS_EXCLUDED(mu_);

  // Fails every pending reply with `why` and every later call too. The first
  // End wins; later ones only fail what is pending.
  void End(const absl::Status& why, PsCompletions* done);

  size_t size() const { return size_; }
  int world_size() const { return config_.world_size; }

 private:
  PsSlice(const ShardJobConfig& config, Optimizer optimizer, std::vector<float> initial,
          int64_t start_step);
  static absl::StatusOr<Optimizer> MakeOptimizer(const ShardJobConfig& config, size_t n);
  // Writes the checkpoint labelled `step` and drops the one of step - 2k.
  absl::Status WriteCheckpointLocked(int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // async: writes a checkpoint if the slowest rank reached a new multiple
  // of checkpoint_every.
  absl::Status MaybeCheckpointAsyncLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushLocked(int64_t step, int rank, size_t count,
                  absl::FunctionRef<void(float*)> accumulate, Reply reply,
                  PsCompletions* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndLocked(const absl::Status& why, PsCompletions* done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ParamSnapshot SnapshotLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckPush(int64_t step, int rank, size_t count) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void ApplySyncStepLocked(PsCompletions* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // async: moves held replies that may proceed into `done`.
  void ReleaseHeldLocked(PsCompletions* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Held {
    int rank;
    Reply reply;
  };

  // Constant after construction.
  const ShardJobConfig config_;
  const size_t size_;
  const ParamSnapshot initial_;
  const int64_t start_step_;  // sync: steps applied before this process

  mutable absl::Mutex mu_;
  absl::Status ended_ ABSL_GUARDED_BY(mu_);  // not OK once ended
  Optimizer optimizer_ ABSL_GUARDED_BY(mu_);
  std::vector<float> params_ ABSL_GUARDED_BY(mu_);
  std::vector<float> scratch_ ABSL_GUARDED_BY(mu_);  // sync: sum; async: push
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;         // bumped on every update
  // params_ at snapshot_version_; its buffer is reused when nobody else
  // holds it any more (no fresh 4 MB allocation per step).
  std::shared_ptr<std::vector<float>> snapshot_ ABSL_GUARDED_BY(mu_);
  int64_t snapshot_version_ ABSL_GUARDED_BY(mu_) = -1;
  // sync
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  int pushes_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<bool> pushed_ ABSL_GUARDED_BY(mu_);
  std::vector<Reply> waiting_ ABSL_GUARDED_BY(mu_);
  // async
  std::vector<int64_t> clock_ ABSL_GUARDED_BY(mu_);
  std::vector<Held> held_ ABSL_GUARDED_BY(mu_);
  int64_t checkpointed_ ABSL_GUARDED_BY(mu_) = 0;  // label of the newest
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_PS_PS_SLICE_H_
