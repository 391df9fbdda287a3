// Helpers of the CUDA backend tests (cuda_test.cc, cuda_mlp_test.cc): device
// buffers, random data, the error measures the tests compare with (see
// cuda_test.cc's comment), and MLP test data.
#ifndef GRADSYNC_TESTS_CUDA_CUDA_TEST_UTIL_H_
#define GRADSYNC_TESTS_CUDA_CUDA_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/kernels.h"
#include "common/optimizer.h"
#include "common/partition.h"
#include "gtest/gtest.h"
#include "worker/model/cuda/cuda_backend.h"
#include "worker/model/cuda/cuda_handles.h"
#include "worker/model/cuda/cuda_model.h"
#include "worker/model/device_model.h"
#include "worker/model/mlp.h"

namespace gradsync {
namespace cuda {

constexpr char kNoGpu[] =
    "no CUDA GPU: DeviceCount() == 0 (no device or no working CUDA driver on "
    "this machine)";
inline bool NoGpu() { return DeviceCount() == 0; }

#define ASSERT_CUDA_OK(expr) ASSERT_EQ(cudaSuccess, (expr)) << #expr
#define ASSERT_OK(expr)                            \
  do {                                             \
    const absl::Status st_ = (expr);               \
    ASSERT_TRUE(st_.ok()) << #expr << ": " << st_; \
  } while (0)

constexpr size_t kGuard = 17;  // NaN elements after each in-place buffer

// Device buffer of n elements plus kGuard guard elements, for tests. All
// copies are synchronous and on the legacy default stream.
template <typename T>
class DevBuf {
 public:
  explicit DevBuf(size_t n) : n_(n) {
    if (cudaMalloc(&p_, (n_ + kGuard) * sizeof(T)) != cudaSuccess) p_ = nullptr;
    Poison();
  }
  ~DevBuf() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;

  bool ok() const { return p_ != nullptr; }
  T* get() { return static_cast<T*>(p_); }
  size_t size() const { return n_; }

  // All bytes 0xFF: NaN for float and double, -1 for int32, 255 for uint8.
  void Poison() {
    if (p_ != nullptr) cudaMemset(p_, 0xFF, (n_ + kGuard) * sizeof(T));
    cudaDeviceSynchronize();
  }
  void Upload(const std::vector<T>& v) {
    ASSERT_EQ(v.size(), n_);
    cudaMemcpy(p_, v.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
    // A copy from pageable memory may return before its DMA has landed;
    // kernels on non-blocking streams are not ordered after it.
    cudaDeviceSynchronize();
  }
  std::vector<T> Download() {
    cudaDeviceSynchronize();
    std::vector<T> v(n_);
    cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  // True when the guard elements are still all-0xFF.
  bool GuardIntact() {
    cudaDeviceSynchronize();
    std::vector<unsigned char> g(kGuard * sizeof(T));
    cudaMemcpy(g.data(), static_cast<char*>(p_) + n_ * sizeof(T), g.size(),
               cudaMemcpyDeviceToHost);
    return std::all_of(g.begin(), g.end(), [](unsigned char c) { return c == 0xFF; });
  }

 private:
  void* p_ = nullptr;
  size_t n_;
};

inline std::vector<float> RandomVec(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// memcmp of the two vectors; on failure names the first differing element
// and how many differ.
template <typename T>
::testing::AssertionResult BitwiseEqual(const std::vector<T>& got,
                                        const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << got.size() << " vs " << want.size();
  }
  if (got.empty() || std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0) {
    return ::testing::AssertionSuccess();
  }
  size_t first = got.size(), count = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      first = std::min(first, i);
      ++count;
    }
  }
  std::ostringstream os;
  os << std::setprecision(9) << count << " of " << got.size()
     << " elements differ bitwise; first at " << first << ": got " << got[first]
     << ", want " << want[first];
  return ::testing::AssertionFailure() << os.str();
}

template <typename T>
double RelError(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double scale = 0;
  for (T w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  const double floor = std::max(1e-3 * scale, 1e-30);
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!std::isfinite(g)) return std::numeric_limits<double>::infinity();
    err = std::max(err, std::fabs(g - w) / std::max(std::fabs(w), floor));
  }
  return err;
}

inline double NormRelError(const float* got, const float* want, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// NormRelError of every W_l and b_l segment; the worst one, naming it.
inline double WorstSegmentError(const MlpSpec& spec, const float* got, const float* want,
                                std::string* where) {
  double worst = 0;
  size_t off = 0;
  for (size_t l = 0; l + 1 < spec.widths.size(); ++l) {
    const size_t in = spec.widths[l], out = spec.widths[l + 1];
    const double ew = NormRelError(got + off, want + off, in * out);
    const double eb = NormRelError(got + off + in * out, want + off + in * out, out);
    if (ew > worst) {
      worst = ew;
      *where = "W" + std::to_string(l);
    }
    if (eb > worst) {
      worst = eb;
      *where = "b" + std::to_string(l);
    }
    off += in * out + out;
  }
  return worst;
}
inline double WorstSegmentError(const MlpSpec& spec, const std::vector<float>& got,
                                const std::vector<float>& want, std::string* where) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  return WorstSegmentError(spec, got.data(), want.data(), where);
}

inline MlpSpec Spec(std::vector<int> widths) {
  MlpSpec s;
  s.widths = std::move(widths);
  return s;
}

// He-uniform weights (Mlp::InitParams) plus small random biases, so that the
// bias path of the forward pass is exercised.
inline std::vector<float> ModelParams(const MlpSpec& spec, uint64_t seed) {
  Mlp mlp(spec);
  std::vector<float> p(mlp.num_params());
  mlp.InitParams(seed, p.data());
  std::mt19937_64 rng(seed ^ 0x5bd1e995u);
  std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
  for (int l = 0; l < mlp.num_layers(); ++l) {
    const Range r = mlp.LayerRange(l);
    const size_t out = spec.widths[l + 1];
    for (size_t i = r.end() - out; i < r.end(); ++i) p[i] = dist(rng);
  }
  return p;
}

struct Batch {
  std::vector<float> x;
  std::vector<uint8_t> y;
};

// x uniform in [0, 1); labels uniform in [0, classes), except that every
// 11th label is 255 (out of range) when `bad_labels` and classes < 255.
inline Batch RandomBatch(const MlpSpec& spec, int rows, uint64_t seed,
                         bool bad_labels = false) {
  Batch b;
  b.x = RandomVec(static_cast<size_t>(rows) * spec.widths[0], seed, 0.0f, 1.0f);
  std::mt19937_64 rng(seed + 1);
  const int classes = spec.widths.back();
  b.y.resize(rows);
  for (int r = 0; r < rows; ++r) {
    b.y[r] = static_cast<uint8_t>(rng() % classes);
    if (bad_labels && classes < 255 && r % 11 == 5) b.y[r] = 255;
  }
  return b;
}

// Smallest |pre-activation| of any hidden unit over the batch, in double.
// A unit whose pre-activation is within float rounding of 0 may take
// different ReLU branches on CPU and GPU, which changes its gradient by O(1)
// — not a bug, but it would make a tight comparison flaky.
inline double MinHiddenMargin(const MlpSpec& spec, const std::vector<float>& params,
                              const Batch& b) {
  const int layers = static_cast<int>(spec.widths.size()) - 1;
  const int rows = static_cast<int>(b.y.size());
  double margin = std::numeric_limits<double>::infinity();
  for (int r = 0; r < rows; ++r) {
    std::vector<double> a(b.x.begin() + static_cast<size_t>(r) * spec.widths[0],
                          b.x.begin() + static_cast<size_t>(r + 1) * spec.widths[0]);
    size_t off = 0;
    for (int l = 0; l + 1 < layers; ++l) {
      const int in = spec.widths[l], out = spec.widths[l + 1];
      std::vector<double> z(out);
      for (int o = 0; o < out; ++o) {
        double s = params[off + static_cast<size_t>(out) * in + o];
        const float* w = params.data() + off + static_cast<size_t>(o) * in;
        for (int i = 0; i < in; ++i) s += static_cast<double>(w[i]) * a[i];
        margin = std::min(margin, std::fabs(s));
        z[o] = std::max(s, 0.0);
      }
      a = std::move(z);
      off += static_cast<size_t>(out) * in + out;
    }
  }
  return margin;
}

// A batch whose hidden pre-activations all stay >= 1e-5 away from 0.
inline Batch WellSeparatedBatch(const MlpSpec& spec, const std::vector<float>& params,
                                int rows, uint64_t seed, bool bad_labels) {
  for (uint64_t s = seed; s < seed + 200; ++s) {
    Batch b = RandomBatch(spec, rows, s, bad_labels);
    if (MinHiddenMargin(spec, params, b) >= 1e-5) return b;
  }
  ADD_FAILURE() << "no well-separated batch found";
  return RandomBatch(spec, rows, seed, bad_labels);
}
}  // namespace cuda
}  // namespace gradsync

#endif  // GRADSYNC_TESTS_CUDA_CUDA_TEST_UTIL_H_
