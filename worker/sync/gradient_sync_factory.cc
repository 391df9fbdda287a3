#include "worker/sync/gradient_sync_factory.h"

#include "worker/sync/allreduce_sync.h"
#include "worker/sync/ps_sync.h"

namespace gradsync {

absl::StatusOr<std::unique_ptr<GradientSync>> MakeGradientSync(const JobOptions* job,
                                                               Transport* transport,
                                                               const TuningTable* tuning,
                                                               const StallWatch* stall,
                                                               const Env* env) {
  switch (job->strategy) {
    case SyncStrategy::kPs:
      if (job->ps_shards.empty()) {
        return absl::InvalidArgumentError("ps job without PS shards");
      }
      return MakePsSync(job, stall, env);
    case SyncStrategy::kAllreduce:
      if (transport == nullptr) {
        return absl::InvalidArgumentError("allreduce job without a transport");
      }
      return MakeAllreduceSync(job, transport, tuning,
                               env != nullptr ? env : Env::Default());
  }
  return absl::InvalidArgumentError("strategy: unknown");
}

}  // namespace gradsync
