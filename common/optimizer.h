// Optimizers on flat float32 buffers. Used by ring workers (whole vector) and
// by PS shards (their slice), so the same update runs in both strategies.
#ifndef GRADSYNC_COMMON_OPTIMIZER_H_
#define GRADSYNC_COMMON_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gradsync {

enum class OptimizerKind {
  kSgd,  // with momentum
  kAdam,
};

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  float lr = 0.05f;
  float momentum = 0.9f;  // sgd only; 0 = plain SGD
  float beta1 = 0.9f;     // adam
  float beta2 = 0.999f;   // adam
  float eps = 1e-8f;      // adam
};

// The state of the optimizers over a whole flat vector of n parameters (a
// ring checkpoint): the moments of every slice's optimizer laid out as the
// parameters, and the step count they share.
struct OptimizerState {
  int64_t steps = 0;
  std::vector<float> first;   // n floats (sgd momentum / adam m), or empty
  std::vector<float> second;  // n floats (adam v), or empty
};

// Thread-compatible; one object per parameter slice.
class Optimizer {
 public:
  // INVALID_ARGUMENT for an unknown kind, lr <= 0 or not finite, momentum
  // outside [0, 1), betas outside [0, 1).
  static absl::StatusOr<Optimizer> Create(const OptimizerOptions& options, size_t n);

  // One update of params[0..n) with grad[0..n).
  //   sgd:  v = momentum*v + g;  p -= lr*v            (PyTorch convention)
  //   adam: m,v moments with bias correction; p -= lr*mhat/(sqrt(vhat)+eps)
  void Apply(float* params, const float* grad);

  size_t size() const { return n_; }
  int64_t steps() const { return t_; }

  // The state a checkpoint saves (common/checkpoint.h): momentum (sgd) or
  // first moment (adam), second moment (adam); each empty when unused.
  const std::vector<float>& first_moment() const { return m_; }
  const std::vector<float>& second_moment() const { return v_; }
  // Continues from saved state: `steps` updates done, moments as returned by
  // first_moment() / second_moment() of an optimizer with the same options
  // and size. INVALID_ARGUMENT (nothing changed) when a moment's size differs
  // from this optimizer's, or steps < 0.
  absl::Status Restore(int64_t steps, std::vector<float> first,
                       std::vector<float> second);

 private:
  Optimizer(const OptimizerOptions& options, size_t n);

  OptimizerOptions options_;
  size_t n_;
  int64_t t_ = 0;
  std::vector<float> m_;  // momentum (sgd) or first moment (adam)
  std::vector<float> v_;  // second moment (adam)
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_OPTIMIZER_H_
