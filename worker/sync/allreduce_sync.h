// GradientSync by allreduce (the strategy users spell --strategy=allreduce): every
// bucket is summed by the job's allreduce algorithm (ring, hd, rd,
// hierarchical) and averaged; each rank then runs the same optimizer step.
#ifndef GRADSYNC_WORKER_SYNC_ALLREDUCE_SYNC_H_
#define GRADSYNC_WORKER_SYNC_ALLREDUCE_SYNC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "common/spec/job_options.h"
#include "worker/collectives/allreduce_factory.h"
#include "worker/sync/gradient_sync.h"

namespace gradsync {

// allreduce x sync (pipeline depth 0) and allreduce x async (depth = staleness: the
// training loop applies step t's average before step t + s + 1 computes, so
// every rank applies the same averages in the same order and replicas stay
// bit-identical).
//
// Each bucket runs MakeAllreduce(job.algorithm) (auto: `tuning`'s choice
// for the bucket's bytes, nullptr = the built-in table). Hierarchical host
// groups: job.groups when set, else ranks whose peer addresses share a host
// (GroupsByHost). `job` and `tuning` must outlive the result.
//
// Checkpoints (job.checkpoint_every, resume_from; sync only): see
// worker/sync/allreduce_checkpoint.h; checkpointer() hands them to the training
// loop, which holds the model's state.
// `env` (not owned, outlives the result) times the broadcast, the
// allreduces and the checkpoint transfers.
std::unique_ptr<GradientSync> MakeAllreduceSync(const JobOptions* job,
                                                Transport* transport,
                                                const TuningTable* tuning = nullptr,
                                                const Env* env = Env::Default());

// The allreduce options of a job, as MakeAllreduceSync uses them (and bench
// jobs may): segment size chunk_bytes, the step timeout, `tuning`, and host
// groups: job.groups when set, else GroupsByHost(peer_addresses).
AllreduceOptions AllreduceOptionsFor(const JobOptions& job, const TuningTable* tuning);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_ALLREDUCE_SYNC_H_
