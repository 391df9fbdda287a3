#include "common/optimizer.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/vector_clones.h"

namespace gradsync {
namespace {

// The elementwise steps, vectorized (common/vector_clones.h). Each element's
// operations and their order are those of the plain loop, and IEEE-754
// addition, multiplication, division and square root are correctly rounded
// in every vector width, so the results are the same bits. std::sqrt is
// vectorized because this file is built with -fno-math-errno
// (common/CMakeLists.txt): with errno, GCC calls sqrtf for each element that
// might be negative and keeps the whole loop scalar (Adam ran at a tenth of
// SGD's speed).

GRADSYNC_VECTOR_CLONES
void SgdStep(float* __restrict p, const float* __restrict g, size_t n, float lr) {
  for (size_t i = 0; i < n; ++i) p[i] -= lr * g[i];
}

GRADSYNC_VECTOR_CLONES
void SgdMomentumStep(float* __restrict p, const float* __restrict g, float* __restrict v,
                     size_t n, float lr, float mu) {
  for (size_t i = 0; i < n; ++i) {
    v[i] = mu * v[i] + g[i];
    p[i] -= lr * v[i];
  }
}

GRADSYNC_VECTOR_CLONES
void AdamStep(float* __restrict p, const float* __restrict g, float* __restrict m,
              float* __restrict v, size_t n, float lr, float b1, float b2, float c1,
              float c2, float eps) {
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i];
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    const float mhat = m[i] * c1;
    const float vhat = v[i] * c2;
    p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
  }
}

}  // namespace

absl::StatusOr<Optimizer> Optimizer::Create(const OptimizerOptions& options, size_t n) {
  if (options.kind != OptimizerKind::kSgd && options.kind != OptimizerKind::kAdam) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer: unknown kind ",
                                                   static_cast<int>(options.kind),
                                                   " (want sgd or adam)"));
  }
  if (!std::isfinite(options.lr) || options.lr <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: lr must be finite and > 0, got ", options.lr));
  }
  // Written as !(in range) so that NaN is rejected too.
  auto in_unit = [](float v) { return v >= 0.0f && v < 1.0f; };
  if (options.kind == OptimizerKind::kSgd && !in_unit(options.momentum)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: momentum must be in [0, 1), got ", options.momentum));
  }
  if (options.kind == OptimizerKind::kAdam) {
    if (!in_unit(options.beta1) || !in_unit(options.beta2)) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: betas must be in [0, 1), got ", options.beta1, ", ",
                       options.beta2));
    }
    if (!std::isfinite(options.eps) || options.eps <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: eps must be finite and > 0, got ", options.eps));
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
      SgdStep(params, grad, n_, lr);
    } else {
      SgdMomentumStep(params, grad, m_.data(), n_, lr, options_.momentum);
    }
    return;
  }
  // Adam. Bias corrections are computed in double once per step.
  const float b1 = options_.beta1;
  const float b2 = options_.beta2;
  const double t = static_cast<double>(t_);
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(b1, t)));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(b2, t)));
  AdamStep(params, grad, m_.data(), v_.data(), n_, lr, b1, b2, c1, c2, options_.eps);
}

absl::Status Optimizer::Restore(int64_t steps, std::vector<float> first,
                                std::vector<float> second) {
  if (steps < 0 || first.size() != m_.size() || second.size() != v_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer state of ", first.size(), " + ", second.size(), " floats at step ",
        steps, " does not fit an optimizer of ", m_.size(), " + ", v_.size()));
  }
  t_ = steps;
  m_ = std::move(first);
  v_ = std::move(second);
  return absl::OkStatus();
}

}  // namespace gradsync
