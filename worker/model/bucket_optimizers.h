// One optimizer per gradient bucket over a flat parameter vector, and the
// checkpoint view of their state laid out as the parameters. Shared by the
// host-memory models (the CPU MLP and the TorchScript model), which keep
// their parameters in one flat float vector.
#ifndef GRADSYNC_WORKER_MODEL_BUCKET_OPTIMIZERS_H_
#define GRADSYNC_WORKER_MODEL_BUCKET_OPTIMIZERS_H_

#include <vector>

#include "absl/status/status.h"
#include "common/optimizer.h"
#include "common/partition.h"

namespace gradsync {

// Thread-compatible.
class BucketOptimizers {
 public:
  // One optimizer per bucket; the optimizer's refusal (bad lr, ...) when it
  // cannot be made. Replaces any earlier state.
  absl::Status Configure(const std::vector<Range>& buckets,
                         const OptimizerOptions& optimizer);
  bool configured() const { return !optimizers_.empty(); }
  const std::vector<Range>& buckets() const { return buckets_; }

  // INVALID_ARGUMENT naming the bucket when there is no bucket b.
  absl::Status CheckBucket(int b) const;
  // Updates params[r.begin .. r.end) of bucket b with grad[0 .. r.size).
  void Apply(int b, float* params, const float* grad) {
    optimizers_[b].Apply(params + buckets_[b].begin, grad);
  }

  // The moments of every bucket laid out as a model of n parameters
  // (docs: DeviceModel::GetOptimizerState). FAILED_PRECONDITION before
  // Configure.
  absl::Status Get(size_t n, OptimizerState* out) const;
  // Continues from `state`; INVALID_ARGUMENT (nothing changed) when its
  // moments do not fit n parameters.
  absl::Status Set(size_t n, const OptimizerState& state);

 private:
  std::vector<Range> buckets_;
  std::vector<Optimizer> optimizers_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_BUCKET_OPTIMIZERS_H_
