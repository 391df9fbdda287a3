#include "common/optimizer.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gradsync {

absl::StatusOr<Optimizer> Optimizer::Create(const OptimizerOptions& options,
                                            size_t n) {
  if (options.kind != OptimizerKind::kSgd &&
      options.kind != OptimizerKind::kAdam) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: unknown kind ", static_cast<int>(options.kind),
                     " (want sgd or adam)"));
  }
  if (!std::isfinite(options.lr) || options.lr <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: lr must be finite and > 0, got ", options.lr));
  }
  // Written as !(in range) so that NaN is rejected too.
  auto in_unit = [](float v) { return v >= 0.0f && v < 1.0f; };
  if (options.kind == OptimizerKind::kSgd && !in_unit(options.momentum)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer: momentum must be in [0, 1), got ", options.momentum));
  }
  if (options.kind == OptimizerKind::kAdam) {
    if (!in_unit(options.beta1) || !in_unit(options.beta2)) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: betas must be in [0, 1), got ",
                       options.beta1, ", ", options.beta2));
    }
    if (!std::isfinite(options.eps) || options.eps <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer: eps must be finite and > 0, got ", options.eps));
    }
  }
  return Optimizer(options, n);
}

Optimizer::Optimizer(const OptimizerOptions& options, size_t n)
    : options_(options), n_(n) {
  const bool adam = options_.kind == OptimizerKind::kAdam;
  // Plain SGD (momentum 0) keeps no state.
  if (adam || options_.momentum != 0.0f) m_.assign(n_, 0.0f);
  if (adam) v_.assign(n_, 0.0f);
}

void Optimizer::Apply(float* params, const float* grad) {
  ++t_;
  const float lr = options_.lr;
  if (options_.kind == OptimizerKind::kSgd) {
    if (m_.empty()) {
      for (size_t i = 0; i < n_; ++i) params[i] -= lr * grad[i];
      return;
    }
    const float mu = options_.momentum;
    float* v = m_.data();
    for (size_t i = 0; i < n_; ++i) {
      v[i] = mu * v[i] + grad[i];
      params[i] -= lr * v[i];
    }
    return;
  }
  // Adam. Bias corrections are computed in double once per step.
  const float b1 = options_.beta1;
  const float b2 = options_.beta2;
  const float eps = options_.eps;
  const double t = static_cast<double>(t_);
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(b1, t)));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(b2, t)));
  float* m = m_.data();
  float* v = v_.data();
  for (size_t i = 0; i < n_; ++i) {
    const float g = grad[i];
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    const float mhat = m[i] * c1;
    const float vhat = v[i] * c2;
    params[i] -= lr * mhat / (std::sqrt(vhat) + eps);
  }
}

absl::Status Optimizer::Restore(int64_t steps, std::vector<float> first,
                                std::vector<float> second) {
  if (steps < 0 || first.size() != m_.size() || second.size() != v_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer state of ", first.size(), " + ", second.size(),
        " floats at step ", steps, " does not fit an optimizer of ", m_.size(),
        " + ", v_.size()));
  }
  t_ = steps;
  m_ = std::move(first);
  v_ = std::move(second);
  return absl::OkStatus();
}

}  // namespace gradsync
