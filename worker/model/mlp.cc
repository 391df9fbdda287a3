#include "worker/model/mlp.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gradsync {
namespace {

constexpr int64_t kEvalBlock = 1024;

// Numerically stable log-softmax pieces for one row of logits: returns
// log(sum_j exp(z_j - max)) and stores max in *zmax.
double LogSumExpShifted(const float* z, int k, float* zmax) {
  float m = z[0];
  for (int j = 1; j < k; ++j) m = std::max(m, z[j]);
  double s = 0;
  for (int j = 0; j < k; ++j) s += std::exp(static_cast<double>(z[j] - m));
  *zmax = m;
  return std::log(s);
}

}  // namespace

Mlp::Mlp(MlpSpec spec) : spec_(std::move(spec)), num_params_(0) {
  const int layers = num_layers();
  for (int l = 0; l < layers; ++l) {
    const size_t in = static_cast<size_t>(spec_.widths[l]);
    const size_t out = static_cast<size_t>(spec_.widths[l + 1]);
    w_offset_.push_back(num_params_);
    b_offset_.push_back(num_params_ + out * in);
    num_params_ += out * in + out;
  }
  acts_.resize(spec_.widths.size());
  deltas_.resize(spec_.widths.size());
}

Range Mlp::LayerRange(int l) const {
  const size_t in = static_cast<size_t>(spec_.widths[l]);
  const size_t out = static_cast<size_t>(spec_.widths[l + 1]);
  return Range{w_offset_[l], out * in + out};
}

void Mlp::InitParams(uint64_t seed, float* params) const {
  std::mt19937_64 rng(seed);
  for (int l = 0; l < num_layers(); ++l) {
    const int in = spec_.widths[l];
    const size_t count =
        static_cast<size_t>(in) * static_cast<size_t>(spec_.widths[l + 1]);
    // He-uniform: U(-a, a) with a = sqrt(6 / fan_in).
    const float a = static_cast<float>(std::sqrt(6.0 / in));
    float* w = params + w_offset_[l];
    for (size_t i = 0; i < count; ++i) {
      // Top 24 bits -> exact float in [0, 1); the standard distributions are
      // implementation-defined, this mapping is not.
      const float u = static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);
      w[i] = (2.0f * u - 1.0f) * a;
    }
    std::fill_n(params + b_offset_[l], spec_.widths[l + 1], 0.0f);
  }
}

void Mlp::Forward(const float* params, const float* x, int batch) {
  const int layers = num_layers();
  for (size_t i = 0; i < acts_.size(); ++i) {
    acts_[i].resize(static_cast<size_t>(batch) * spec_.widths[i]);
  }
  std::copy_n(x, acts_[0].size(), acts_[0].data());
  for (int l = 0; l < layers; ++l) {
    const int in = spec_.widths[l];
    const int out = spec_.widths[l + 1];
    const float* w = params + w_offset_[l];
    const float* b = params + b_offset_[l];
    float* z = acts_[l + 1].data();
    // Z[batch][out] = A[batch][in] * W[out][in]^T.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f,
                acts_[l].data(), in, w, in, 0.0f, z, out);
    const bool hidden = l + 1 < layers;
    // Bias and ReLU fused in one pass over Z.
    for (int r = 0; r < batch; ++r) {
      float* row = z + static_cast<size_t>(r) * out;
      if (hidden) {
        for (int j = 0; j < out; ++j) row[j] = std::max(row[j] + b[j], 0.0f);
      } else {
        for (int j = 0; j < out; ++j) row[j] += b[j];
      }
    }
  }
}

float Mlp::ForwardBackward(const float* params, const float* x, const uint8_t* y,
                           int batch, float* grad, const PassHooks& hooks) {
  std::fill_n(grad, num_params_, 0.0f);
  if (batch <= 0) {
    if (hooks.forward_done) hooks.forward_done();
    for (int l = num_layers() - 1; l >= 0 && hooks.layer_done; --l) {
      hooks.layer_done(l);
    }
    return 0.0f;
  }
  Forward(params, x, batch);
  if (hooks.forward_done) hooks.forward_done();
  const int layers = num_layers();
  const int classes = spec_.widths[layers];
  for (size_t i = 1; i < deltas_.size(); ++i) {
    deltas_[i].resize(static_cast<size_t>(batch) * spec_.widths[i]);
  }

  // dL/dlogits of the mean loss: (softmax - onehot) / batch.
  const float inv_batch = 1.0f / static_cast<float>(batch);
  double loss = 0;
  for (int r = 0; r < batch; ++r) {
    const float* z = acts_[layers].data() + static_cast<size_t>(r) * classes;
    float* d = deltas_[layers].data() + static_cast<size_t>(r) * classes;
    float zmax;
    const double lse = LogSumExpShifted(z, classes, &zmax);
    for (int j = 0; j < classes; ++j) {
      d[j] = static_cast<float>(std::exp(z[j] - zmax - lse)) * inv_batch;
    }
    // Labels must be < classes (the dataset loader checks); an out-of-range
    // label only contributes its softmax term instead of indexing out of
    // bounds.
    if (y[r] < classes) {
      d[y[r]] -= inv_batch;
      loss += lse - static_cast<double>(z[y[r]] - zmax);
    }
  }

  for (int l = layers - 1; l >= 0; --l) {
    const int in = spec_.widths[l];
    const int out = spec_.widths[l + 1];
    const float* dz = deltas_[l + 1].data();
    const float* a = acts_[l].data();
    // dW[out][in] = dZ[batch][out]^T * A[batch][in].
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dz, out, a,
                in, 0.0f, grad + w_offset_[l], in);
    // db = column sums of dZ, summed in fixed row order (deterministic).
    float* gb = grad + b_offset_[l];
    for (int r = 0; r < batch; ++r) {
      const float* row = dz + static_cast<size_t>(r) * out;
      for (int j = 0; j < out; ++j) gb[j] += row[j];
    }
    if (hooks.layer_done) hooks.layer_done(l);
    if (l == 0) break;  // no gradient needed w.r.t. the input
    // dA[batch][in] = dZ[batch][out] * W[out][in], then mask by ReLU'(z):
    // a = relu(z) > 0 exactly where z > 0.
    float* da = deltas_[l].data();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dz, out,
                params + w_offset_[l], in, 0.0f, da, in);
    const size_t count = static_cast<size_t>(batch) * in;
    for (size_t i = 0; i < count; ++i) {
      if (a[i] <= 0.0f) da[i] = 0.0f;
    }
  }
  return static_cast<float>(loss / batch);
}

EvalResult Mlp::Evaluate(const float* params, const float* x, const uint8_t* y,
                         int64_t n) {
  EvalResult eval;
  const int layers = num_layers();
  const int in = spec_.widths[0];
  const int classes = spec_.widths[layers];
  double loss = 0;
  for (int64_t begin = 0; begin < n; begin += kEvalBlock) {
    const int rows = static_cast<int>(std::min(kEvalBlock, n - begin));
    Forward(params, x + begin * in, rows);
    for (int r = 0; r < rows; ++r) {
      const float* z = acts_[layers].data() + static_cast<size_t>(r) * classes;
      const uint8_t label = y[begin + r];
      float zmax;
      const double lse = LogSumExpShifted(z, classes, &zmax);
      // First maximum wins ties, matching a naive argmax.
      const int pred = static_cast<int>(std::max_element(z, z + classes) - z);
      if (label < classes) {
        loss += lse - static_cast<double>(z[label] - zmax);
        if (pred == label) ++eval.correct;
      }
    }
  }
  eval.n = std::max<int64_t>(n, 0);
  eval.mean_loss = eval.n ? loss / static_cast<double>(eval.n) : 0.0;
  return eval;
}

}  // namespace gradsync
