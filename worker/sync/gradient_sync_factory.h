// Builds the GradientSync of a job's strategy: the one place that knows both
// implementations (ps_sync.h, allreduce_sync.h), so gradient_sync.h knows neither.
#ifndef GRADSYNC_WORKER_SYNC_GRADIENT_SYNC_FACTORY_H_
#define GRADSYNC_WORKER_SYNC_GRADIENT_SYNC_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "common/spec/job_options.h"
#include "worker/collectives/transport.h"
#include "worker/sync/gradient_sync.h"

namespace gradsync {

class StallWatch;
class TuningTable;

// Builds the implementation for the job's strategy and mode.
// `job` and `transport` (ring strategies; may be null for ps) must
// outlive the result, and so must `tuning` (ring strategies with algorithm
// auto: the table that chooses per bucket; nullptr = the built-in table),
// and `stall` (ps strategies: reports PS calls waiting past its threshold;
// ring strategies report through a StallTransport instead; may be null).
// `env` (not owned, outlives the result) is the clock of both
// implementations; null: ps takes the stall watch's, ring Env::Default().
absl::StatusOr<std::unique_ptr<GradientSync>> MakeGradientSync(
    const JobOptions* job, Transport* transport, const TuningTable* tuning = nullptr,
    const StallWatch* stall = nullptr, const Env* env = nullptr);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_GRADIENT_SYNC_FACTORY_H_
