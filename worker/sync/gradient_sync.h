// The one interface the training loop synchronises through. The loop never
// asks which strategy is behind it.
#ifndef GRADSYNC_WORKER_SYNC_GRADIENT_SYNC_H_
#define GRADSYNC_WORKER_SYNC_GRADIENT_SYNC_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/partition.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

class Transport;

// Initialize, Step and Finish are called from the training thread in that
// order; Abort may be called from any thread and makes a blocked call return.
class GradientSync {
 public:
  virtual ~GradientSync() = default;

  // On entry `params` holds this rank's own initial values (same seed on all
  // ranks); on return it holds the job's initial parameters (from the PS, or
  // rank 0's broadcast), identical on every rank.
  virtual absl::Status Initialize(float* params) = 0;

  // Hands over this rank's gradient for `step` (mean over its batch). `grad`
  // may be overwritten. On return `params` holds what step+1 computes on.
  virtual absl::Status Step(int64_t step, float* grad, float* params) = 0;

  // Completes outstanding work; on return `params` are this rank's final
  // parameters.
  virtual absl::Status Finish(float* params) = 0;

  virtual void Abort(const absl::Status& status) = 0;

  // ---- Bucketed use (the device trainer: synchronise gradient buckets while
  // backward still runs). Buckets are contiguous ranges of the flat vector.

  // What SyncBucket leaves behind.
  enum class BucketOutput {
    kAveragedGradient,  // grad[range] = mean gradient; caller runs the optimizer
    kParameters,        // params[range] = new parameters (the PS ran it)
  };

  // Declares the buckets; call before Initialize. Default: one bucket holding
  // the whole vector.
  virtual absl::Status ConfigureBuckets(const std::vector<Range>& buckets) = 0;

  // Synchronises bucket `bucket` of `step`; grad and params are the full flat
  // host vectors, only the bucket's range is read / written. Buckets of one
  // step are passed in order from a single thread.
  virtual absl::StatusOr<BucketOutput> SyncBucket(int64_t step, int bucket,
                                                  float* grad, float* params) = 0;

  // How many steps late the caller may apply a step's bucket results
  // (ring async: the staleness bound; 0 elsewhere).
  virtual int pipeline_depth() const = 0;
};

struct SyncContext {
  const v1::Assignment* assignment = nullptr;
  size_t num_params = 0;
  Transport* transport = nullptr;  // ring strategies; owned by the caller
};

// Builds the implementation for the assignment's strategy and mode.
absl::StatusOr<std::unique_ptr<GradientSync>> MakeGradientSync(
    const SyncContext& ctx);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_GRADIENT_SYNC_H_
