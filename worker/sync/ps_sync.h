// GradientSync through parameter-server shards: every bucket is cut into
// partitions of <= ps_partition_bytes spread round-robin over the shards
// (common/ps_layout.h); a bucket's partitions are pushed a window at a time
// (PsClient::set_push_window), each answered with its new parameters.
#ifndef GRADSYNC_WORKER_SYNC_PS_SYNC_H_
#define GRADSYNC_WORKER_SYNC_PS_SYNC_H_

#include <memory>

#include "common/env.h"
#include "common/spec/job_options.h"
#include "worker/sync/gradient_sync.h"
#include "worker/sync/stall_watch.h"

namespace gradsync {

// ps x sync (BSP) and ps x async (ASGD / SSP): the shards apply the optimizer;
// the worker only pushes gradients and receives parameters. `job` must
// outlive the result.
// `stall` (may be null) must outlive the result: it hears of PS calls that
// wait past its threshold. `env` (not owned, outlives the result) times the
// calls; null: the stall watch's, else Env::Default().
std::unique_ptr<GradientSync> MakePsSync(const JobOptions* job,
                                         const StallWatch* stall = nullptr,
                                         const Env* env = nullptr);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_PS_SYNC_H_
