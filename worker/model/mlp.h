// A multilayer perceptron on flat parameter / gradient buffers (CPU, OpenBLAS).
//
// Layout of the flat parameter vector, layer l = 0..L-1 in order:
//   W_l: [out_l][in_l] row-major, then b_l: [out_l].
// Hidden layers use ReLU; the last layer feeds softmax cross-entropy.
#ifndef GRADSYNC_WORKER_MODEL_MLP_H_
#define GRADSYNC_WORKER_MODEL_MLP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/partition.h"
#include "common/spec/model_spec.h"
#include "worker/model/eval_result.h"

namespace gradsync {

// Not thread-safe: holds activation scratch space. One per trainer.
class Mlp {
 public:
  explicit Mlp(MlpSpec spec);

  const MlpSpec& spec() const { return spec_; }
  size_t num_params() const { return num_params_; }
  int num_layers() const { return static_cast<int>(spec_.widths.size()) - 1; }

  // Range of layer l's parameters (W_l then b_l) inside the flat vector.
  Range LayerRange(int l) const;

  // He-uniform weights drawn from std::mt19937_64(seed) with a
  // library-independent uniform mapping; zero biases. Deterministic.
  void InitParams(uint64_t seed, float* params) const;

  // Forward + backward for `batch` samples x[batch][in], labels y[batch].
  // Writes d(mean loss)/d(params) to grad (num_params floats, overwritten)
  // and returns the mean softmax cross-entropy loss of the batch.
  // `hooks` (optional) observe the pass on the calling thread:
  // forward_done once the forward pass is computed, then layer_done(l) once
  // layer l's gradient is final (l = L-1 down to 0), so that a caller can
  // hand finished buckets to communication while backward continues.
  struct PassHooks {
    std::function<void()> forward_done;
    std::function<void(int layer)> layer_done;
  };
  float ForwardBackward(const float* params, const float* x, const uint8_t* y, int batch,
                        float* grad, const PassHooks& hooks = {});

  // Mean loss and number of correct argmax predictions over n samples,
  // evaluated in blocks to bound memory.
  EvalResult Evaluate(const float* params, const float* x, const uint8_t* y, int64_t n);

 private:
  // Forward pass of `batch` rows; fills acts_[0..L] (acts_[0] = x copy).
  void Forward(const float* params, const float* x, int batch);

  MlpSpec spec_;
  size_t num_params_;
  std::vector<size_t> w_offset_;            // offset of W_l
  std::vector<size_t> b_offset_;            // offset of b_l
  std::vector<std::vector<float>> acts_;    // per layer activations
  std::vector<std::vector<float>> deltas_;  // per layer backprop scratch
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_MLP_H_
