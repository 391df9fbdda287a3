// GradientSync by ring allreduce: every bucket is summed over the ring and
// averaged; each rank then runs the same optimizer step.
#ifndef GRADSYNC_WORKER_SYNC_RING_SYNC_H_
#define GRADSYNC_WORKER_SYNC_RING_SYNC_H_

#include <memory>

#include "worker/sync/gradient_sync.h"

namespace gradsync {

// ring x sync (pipeline depth 0) and ring x async (depth = staleness: the
// training loop applies step t's average before step t + s + 1 computes, so
// every rank applies the same averages in the same order and replicas stay
// bit-identical).
std::unique_ptr<GradientSync> MakeRingSync(const v1::Assignment* assignment,
                                           Transport* transport);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_RING_SYNC_H_
