// GradientSync by ring allreduce: every bucket is summed over the ring and
// averaged; each rank then runs the same optimizer step.
#ifndef GRADSYNC_WORKER_SYNC_RING_SYNC_H_
#define GRADSYNC_WORKER_SYNC_RING_SYNC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "gradsync/v1/gradsync.pb.h"
#include "worker/collectives/allreduce_factory.h"
#include "worker/sync/gradient_sync.h"

namespace gradsync {

// ring x sync (pipeline depth 0) and ring x async (depth = staleness: the
// training loop applies step t's average before step t + s + 1 computes, so
// every rank applies the same averages in the same order and replicas stay
// bit-identical).
//
// Each bucket runs MakeAllreduce(spec.algorithm) (auto: `tuning`'s choice
// for the bucket's bytes, nullptr = the built-in table). Hierarchical host
// groups: spec.groups when set, else ranks whose peer addresses share a host
// (GroupsByHost). `tuning` must outlive the result.
//
// Checkpoints (spec.checkpoint_every, resume_from; sync only): see
// worker/sync/ring_checkpoint.h; checkpointer() hands them to the training
// loop, which holds the model's state.
// `env` (not owned, outlives the result) times the broadcast, the
// allreduces and the checkpoint transfers.
std::unique_ptr<GradientSync> MakeRingSync(const v1::Assignment* assignment,
                                           Transport* transport,
                                           const TuningTable* tuning = nullptr,
                                           const Env* env = Env::Default());

// The allreduce options of a validated assignment, as MakeRingSync uses them
// (and bench jobs may): segment size chunk_bytes, the step timeout, `tuning`,
// and host groups: spec.groups when set, else GroupsByHost(peer_addresses).
// INVALID_ARGUMENT naming "groups" for bad spec.groups.
absl::StatusOr<AllreduceOptions> AllreduceOptionsFor(const v1::Assignment& assignment,
                                                     const TuningTable* tuning);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_RING_SYNC_H_
