// GradientSync through parameter-server shards: every bucket is pushed to the
// shards that own its slices and answered with the new parameters.
#ifndef GRADSYNC_WORKER_SYNC_PS_SYNC_H_
#define GRADSYNC_WORKER_SYNC_PS_SYNC_H_

#include <memory>

#include "worker/sync/gradient_sync.h"

namespace gradsync {

// ps x sync (BSP) and ps x async (ASGD / SSP): the shards apply the optimizer;
// the worker only pushes gradients and receives parameters.
std::unique_ptr<GradientSync> MakePsSync(const v1::Assignment* assignment);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_PS_SYNC_H_
