#include "worker/sync/gradient_sync_factory.h"

#include "absl/strings/str_cat.h"
#include "common/spec/job_spec.h"
#include "worker/sync/ps_sync.h"
#include "worker/sync/ring_sync.h"

namespace gradsync {

absl::StatusOr<std::unique_ptr<GradientSync>> MakeGradientSync(const v1::Assignment* a,
                                                               Transport* transport,
                                                               const TuningTable* tuning,
                                                               const StallWatch* stall,
                                                               const Env* env) {
  switch (a->spec().strategy()) {
    case v1::STRATEGY_PS:
      if (a->ps_shards_size() == 0) {
        return absl::InvalidArgumentError("ps job without PS shards");
      }
      return MakePsSync(a, stall, env);
    case v1::STRATEGY_RING:
      if (transport == nullptr) {
        return absl::InvalidArgumentError("ring job without a transport");
      }
      return MakeRingSync(a, transport, tuning, env != nullptr ? env : Env::Default());
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("strategy: unknown ", StrategyName(a->spec().strategy())));
  }
}

}  // namespace gradsync
