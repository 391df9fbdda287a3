#include "worker/model/host_model.h"

#include <cstring>

#include "common/kernels.h"

namespace gradsync {

void HostModel::AllocateHost(size_t n) {
  params_.assign(n, 0.0f);
  grad_.assign(n, 0.0f);
}

absl::Status HostModel::ConfigureBuckets(const std::vector<Range>& buckets,
                                         const OptimizerOptions& optimizer,
                                         int grad_slots) {
  if (grad_slots < 1) return absl::InvalidArgumentError("grad_slots must be >= 1");
  return optimizers_.Configure(buckets, optimizer);
}

absl::Status HostModel::SetParams(const float* host) {
  if (predicted_) return absl::FailedPreconditionError("parameters are predicted");
  std::memcpy(params_.data(), host, params_.size() * sizeof(float));
  before_prediction_.clear();
  return absl::OkStatus();
}

absl::Status HostModel::SetParamsRange(Range r, const float* host) {
  if (predicted_) return absl::FailedPreconditionError("parameters are predicted");
  std::memcpy(params_.data() + r.begin, host + r.begin, r.size * sizeof(float));
  before_prediction_.clear();
  return absl::OkStatus();
}

absl::Status HostModel::PredictParams(float steps_ahead) {
  if (predicted_) return absl::FailedPreconditionError("parameters already predicted");
  if (before_prediction_.size() != params_.size()) before_prediction_ = params_;
  PredictAhead(params_.data(), before_prediction_.data(), steps_ahead, params_.size());
  predicted_ = true;
  return absl::OkStatus();
}

absl::Status HostModel::RestoreParams() {
  if (!predicted_) return absl::FailedPreconditionError("parameters not predicted");
  std::memcpy(params_.data(), before_prediction_.data(), params_.size() * sizeof(float));
  predicted_ = false;
  return absl::OkStatus();
}

absl::Status HostModel::GetParams(float* host) {
  std::memcpy(host, params_.data(), params_.size() * sizeof(float));
  return absl::OkStatus();
}

absl::Status HostModel::CheckLossRoom() const {
  if (losses_.size() >= kMaxPendingLosses) {
    return absl::FailedPreconditionError("too many losses not taken");
  }
  return absl::OkStatus();
}

absl::StatusOr<float> HostModel::TakeLoss() {
  if (losses_.empty()) return absl::FailedPreconditionError("no pending loss");
  const float loss = losses_.front();
  losses_.pop_front();
  return loss;
}

absl::Status HostModel::StartGradCopy(int bucket, int, float* host) {
  if (absl::Status st = optimizers_.CheckBucket(bucket); !st.ok()) return st;
  const Range& r = optimizers_.buckets()[bucket];
  std::memcpy(host, grad_.data() + r.begin, r.size * sizeof(float));
  return absl::OkStatus();
}

absl::Status HostModel::ApplyGradient(int bucket, const float* host) {
  optimizers_.Apply(bucket, params_.data(), host);
  return absl::OkStatus();
}

absl::Status HostModel::ApplyOwnGradient(int bucket) {
  if (absl::Status st = optimizers_.CheckBucket(bucket); !st.ok()) return st;
  optimizers_.Apply(bucket, params_.data(),
                    grad_.data() + optimizers_.buckets()[bucket].begin);
  return absl::OkStatus();
}

absl::Status HostModel::GetOptimizerState(OptimizerState* out) {
  return optimizers_.Get(params_.size(), out);
}

absl::Status HostModel::SetOptimizerState(const OptimizerState& state) {
  return optimizers_.Set(params_.size(), state);
}

absl::StatusOr<std::shared_ptr<float>> HostModel::AllocHost(size_t floats) {
  return AllocHostFloats(floats);
}

}  // namespace gradsync
