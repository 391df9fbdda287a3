// worker/sync: how gradients are synchronised — the GradientSync contract and
// its parameter-server and ring-allreduce implementations, and the PS client.
//
// The training loop talks to GradientSync only; it never asks which strategy
// is behind it.
#ifndef GRADSYNC_WORKER_SYNC_GRADIENT_SYNC_H_
#define GRADSYNC_WORKER_SYNC_GRADIENT_SYNC_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/partition.h"
#include "common/spec/allreduce_algorithm.h"

namespace gradsync {

class AllreduceCheckpointer;
class StallWatch;
class Transport;

// One contract: Initialize once, SyncBucket for every bucket of every step,
// Finish once; Abort at any time.
//
// Threading: Initialize and Finish are called from the training thread,
// SyncBucket from the communication thread (buckets of one step in order,
// steps in order, one call at a time), never concurrently with each other.
// Abort may be called from any thread and makes a blocked call return.
class GradientSync {
 public:
  // What SyncBucket leaves behind in the bucket's range.
  enum class Output {
    kAveragedGradient,  // grad[range] = mean gradient; caller runs the optimizer
    kParameters,        // params[range] = new parameters (the PS ran it)
  };

  virtual ~GradientSync() = default;

  // Declares the buckets (contiguous ranges of the flat vector, in the order
  // SyncBucket will see them) and agrees on initial parameters: on entry
  // `params` holds this rank's own initial values (same seed on all ranks); on
  // return it holds the job's initial parameters (from the PS, or rank 0's
  // broadcast), identical on every rank.
  virtual absl::Status Initialize(const std::vector<Range>& buckets, float* params) = 0;

  // Synchronises bucket `bucket` of `step`. grad and params are the full flat
  // host vectors; only the bucket's range is read and written (see output()).
  virtual absl::Status SyncBucket(int64_t step, int bucket, float* grad,
                                  float* params) = 0;

  // Completes the job's synchronisation. On entry `params` are this rank's
  // parameters after the last applied step; on return its final parameters
  // (ps async: the newest on the PS).
  virtual absl::Status Finish(float* params) = 0;

  // Fails pending and future calls with `status`. Idempotent.
  virtual void Abort(const absl::Status& status) = 0;

  // Constant per implementation.
  virtual Output output() const = 0;

  // How many steps late the caller may apply a step's results: step t's
  // results must be applied before step t + depth + 1 computes (ring async:
  // the staleness bound; 0 elsewhere).
  virtual int pipeline_depth() const = 0;

  // True when SyncBucket would leave every gradient as it is and touch
  // nothing else (a ring of one rank averages with itself). With
  // output() == kAveragedGradient and depth 0 the caller may then apply its
  // own gradient where it lies (on a GPU: no copy to the host and back) and
  // not call SyncBucket at all.
  virtual bool identity() const { return false; }

  // The collective algorithm each bucket runs, in bucket order, once
  // Initialize has succeeded (never kAuto: what auto chose).
  // Empty for strategies without collectives (ps).
  virtual std::vector<AllreduceAlgorithm> bucket_algorithms() const { return {}; }

  // The first step to train, once Initialize has succeeded: 0, or the step
  // of the checkpoint a resumed job continues from (spec.resume_from; the
  // initial parameters are then the checkpoint's).
  virtual int64_t start_step() const { return 0; }

  // Checkpoints the training loop takes of the model's state (ring jobs
  // with checkpoint_every or resume_from: the parameters and optimizer
  // state live in the model, not here); null when there are none or the
  // strategy checkpoints on its own (ps). Owned by this object. After
  // Initialize of a resumed job, its restored() holds the optimizer state
  // to load into the model.
  virtual AllreduceCheckpointer* checkpointer() { return nullptr; }

  // Jobs whose step budget is the job's, not each rank's
  // (JobOptions::job_wide_steps: ps async): the updates applied so far for
  // the whole job, in pushes (a resumed job counts its start step x world
  // as applied), as the answers this rank got said; the trainer stops once
  // it reaches steps x world. -1 elsewhere: every rank runs every step.
  virtual int64_t JobPushesApplied() const { return -1; }
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_GRADIENT_SYNC_H_
