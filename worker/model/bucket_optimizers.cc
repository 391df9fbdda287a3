#include "worker/model/bucket_optimizers.h"

#include <algorithm>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

absl::Status NotConfigured() {
  return absl::FailedPreconditionError("model not configured");
}

// v[r] (empty when v is).
std::vector<float> SliceOf(const std::vector<float>& v, Range r) {
  if (v.empty()) return {};
  return std::vector<float>(v.begin() + r.begin, v.begin() + r.begin + r.size);
}

}  // namespace

absl::Status BucketOptimizers::Configure(const std::vector<Range>& buckets,
                                         const OptimizerOptions& optimizer) {
  std::vector<Optimizer> made;
  for (const Range& r : buckets) {
    absl::StatusOr<Optimizer> o = Optimizer::Create(optimizer, r.size);
    if (!o.ok()) return o.status();
    made.push_back(std::move(*o));
  }
  buckets_ = buckets;
  optimizers_ = std::move(made);
  return absl::OkStatus();
}

absl::Status BucketOptimizers::CheckBucket(int b) const {
  if (b < 0 || b >= static_cast<int>(buckets_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no bucket ", b));
  }
  return absl::OkStatus();
}

absl::Status BucketOptimizers::Get(size_t n, OptimizerState* out) const {
  if (optimizers_.empty()) return NotConfigured();
  out->steps = optimizers_[0].steps();  // every bucket steps together
  out->first.resize(optimizers_[0].first_moment().empty() ? 0 : n);
  out->second.resize(optimizers_[0].second_moment().empty() ? 0 : n);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Optimizer& o = optimizers_[b];
    std::copy(o.first_moment().begin(), o.first_moment().end(),
              out->first.begin() + (out->first.empty() ? 0 : buckets_[b].begin));
    std::copy(o.second_moment().begin(), o.second_moment().end(),
              out->second.begin() + (out->second.empty() ? 0 : buckets_[b].begin));
  }
  return absl::OkStatus();
}

absl::Status BucketOptimizers::Set(size_t n, const OptimizerState& state) {
  if (optimizers_.empty()) return NotConfigured();
  if ((!state.first.empty() && state.first.size() != n) ||
      (!state.second.empty() && state.second.size() != n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer state of ", state.first.size(), " + ",
                     state.second.size(), " floats for a model of ", n));
  }
  std::vector<Optimizer> restored = optimizers_;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    absl::Status st = restored[b].Restore(state.steps, SliceOf(state.first, buckets_[b]),
                                          SliceOf(state.second, buckets_[b]));
    if (!st.ok()) return st;
  }
  optimizers_ = std::move(restored);
  return absl::OkStatus();
}

}  // namespace gradsync
