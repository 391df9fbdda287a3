// HostModel: what the models whose parameters and gradients live in host
// memory, as two flat float vectors, share (the CPU MLP in cpu_model.cc
// and the TorchScript model in torch/torch_model.cc): setting and reading
// the parameters, the bucket copies (made at once, on the training thread:
// the gradient is final when backward returns and the next backward runs on
// that thread too), the per-bucket optimizers and their checkpoint state,
// and the losses of ForwardBackward calls not yet taken.
#ifndef GRADSYNC_WORKER_MODEL_HOST_MODEL_H_
#define GRADSYNC_WORKER_MODEL_HOST_MODEL_H_

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/model/bucket_optimizers.h"
#include "worker/model/device_model.h"

namespace gradsync {

// Thread-compatible, like every DeviceModel.
class HostModel : public DeviceModel {
 public:
  absl::Status SetParams(const float* host) override;
  absl::Status SetParamsRange(Range r, const float* host) override;
  absl::Status GetParams(float* host) override;
  void SetTrace(TraceRecorder* trace) override { trace_ = trace; }
  absl::StatusOr<float> TakeLoss() override;
  absl::Status StartGradCopy(int bucket, int slot, float* host) override;
  absl::Status WaitGradCopy(int, int) override { return absl::OkStatus(); }
  absl::Status ApplyGradient(int bucket, const float* host) override;
  absl::Status ApplyOwnGradient(int bucket) override;
  absl::Status GetOptimizerState(OptimizerState* out) override;
  absl::Status SetOptimizerState(const OptimizerState& state) override;
  absl::Status PredictParams(float steps_ahead) override;
  absl::Status RestoreParams() override;
  absl::StatusOr<std::shared_ptr<float>> AllocHost(size_t floats) override;

 protected:
  // Losses a model keeps for TakeLoss at most.
  static constexpr size_t kMaxPendingLosses = 2;

  // n parameters and n gradients, zeroed; once, before anything else.
  void AllocateHost(size_t n);
  // The optimizers of `buckets`; INVALID_ARGUMENT for grad_slots < 1 or the
  // optimizer's refusal.
  absl::Status ConfigureBuckets(const std::vector<Range>& buckets,
                                const OptimizerOptions& optimizer, int grad_slots);
  // FAILED_PRECONDITION when kMaxPendingLosses losses wait to be taken.
  absl::Status CheckLossRoom() const;
  void PushLoss(float loss) { losses_.push_back(loss); }

  float* params() { return params_.data(); }
  float* grad() { return grad_.data(); }
  const BucketOptimizers& optimizers() const { return optimizers_; }
  TraceRecorder* trace() const { return trace_; }

 private:
  std::vector<float> params_, grad_;
  // Weight prediction: the parameters the last PredictParams found (empty:
  // none yet, or set since), and whether params_ are predicted now.
  std::vector<float> before_prediction_;
  bool predicted_ = false;
  BucketOptimizers optimizers_;
  std::deque<float> losses_;  // of ForwardBackward calls, oldest first
  TraceRecorder* trace_ = nullptr;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_HOST_MODEL_H_
