// Tests of the CUDA backend (worker/model/cuda/) against the CPU
// implementations (common/kernels.h, common/optimizer.h, worker/model/mlp.h,
// the CPU DeviceModel).
//
// Every test that needs a GPU skips with "no CUDA GPU: ..." when
// DeviceCount() == 0; the CudaBackendNoGpuTest suite runs everywhere.
//
// How results are compared (each kernel's header comment says which applies):
//  * bit-identical kernels (AddInto, Scale, ReluBackward, BiasActivation, the
//    SGD and Adam steps) are compared with memcmp (BitwiseEqual);
//  * BiasGradient is deterministic but sums in a different order than the
//    CPU: bitwise against the CPU on data whose partial sums are all exact,
//    bitwise against itself run to run, and within the summation error bound
//    of its order of additions on random data;
//  * SoftmaxCrossEntropy (device exp/log) with RelError <= 1e-5;
//  * GEMM results (gradients, parameters after steps) with NormRelError per
//    parameter segment, since cuBLAS and OpenBLAS sum in different orders.
// RelError: element-wise |got - want| / max(|want|, 1e-3 * max|want|); NaN /
// Inf in `got` count as infinite error, which the NaN poisoning of outputs
// before each run relies on.
#include "worker/model/cuda/cuda_backend.h"

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
#include "worker/model/cuda/cuda_handles.h"
#include "worker/model/cuda/cuda_model.h"
#include "worker/model/device_model.h"
#include "worker/model/mlp.h"

namespace gradsync {
namespace cuda {
namespace {

constexpr char kNoGpu[] =
    "no CUDA GPU: DeviceCount() == 0 (no device or no working CUDA driver on "
    "this machine)";
bool NoGpu() { return DeviceCount() == 0; }

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
    return std::all_of(g.begin(), g.end(),
                       [](unsigned char c) { return c == 0xFF; });
  }

 private:
  void* p_ = nullptr;
  size_t n_;
};

std::vector<float> RandomVec(size_t n, uint64_t seed, float lo, float hi) {
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
  if (got.empty() ||
      std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0) {
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
     << " elements differ bitwise; first at " << first << ": got "
     << got[first] << ", want " << want[first];
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

double NormRelError(const float* got, const float* want, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// NormRelError of every W_l and b_l segment; the worst one, naming it.
double WorstSegmentError(const MlpSpec& spec, const float* got,
                         const float* want, std::string* where) {
  double worst = 0;
  size_t off = 0;
  for (size_t l = 0; l + 1 < spec.widths.size(); ++l) {
    const size_t in = spec.widths[l], out = spec.widths[l + 1];
    const double ew = NormRelError(got + off, want + off, in * out);
    const double eb = NormRelError(got + off + in * out, want + off + in * out,
                                   out);
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
double WorstSegmentError(const MlpSpec& spec, const std::vector<float>& got,
                         const std::vector<float>& want, std::string* where) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  return WorstSegmentError(spec, got.data(), want.data(), where);
}

MlpSpec Spec(std::vector<int> widths) {
  MlpSpec s;
  s.widths = std::move(widths);
  return s;
}

// He-uniform weights (Mlp::InitParams) plus small random biases, so that the
// bias path of the forward pass is exercised.
std::vector<float> ModelParams(const MlpSpec& spec, uint64_t seed) {
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
Batch RandomBatch(const MlpSpec& spec, int rows, uint64_t seed,
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
double MinHiddenMargin(const MlpSpec& spec, const std::vector<float>& params,
                       const Batch& b) {
  const int layers = static_cast<int>(spec.widths.size()) - 1;
  const int rows = static_cast<int>(b.y.size());
  double margin = std::numeric_limits<double>::infinity();
  for (int r = 0; r < rows; ++r) {
    std::vector<double> a(
        b.x.begin() + static_cast<size_t>(r) * spec.widths[0],
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
Batch WellSeparatedBatch(const MlpSpec& spec, const std::vector<float>& params,
                         int rows, uint64_t seed, bool bad_labels) {
  for (uint64_t s = seed; s < seed + 200; ++s) {
    Batch b = RandomBatch(spec, rows, s, bad_labels);
    if (MinHiddenMargin(spec, params, b) >= 1e-5) return b;
  }
  ADD_FAILURE() << "no well-separated batch found";
  return RandomBatch(spec, rows, seed, bad_labels);
}

// ---------------------------------------------------------------------------
// Without a GPU.

TEST(CudaBackendNoGpuTest, FailsCleanlyOnMissingDevice) {
  const int count = DeviceCount();
  EXPECT_GE(count, 0);
  EXPECT_EQ(DeviceName(-1), "");
  EXPECT_EQ(DeviceName(count), "");
  EXPECT_EQ(SetDevice(count).code(), absl::StatusCode::kFailedPrecondition);

  for (int device : {count, count + 3, -1}) {
    absl::StatusOr<std::unique_ptr<CudaMlp>> mlp =
        CudaMlp::Create(Spec({5, 4, 3}), device, false, 8);
    ASSERT_FALSE(mlp.ok()) << "device " << device;
    EXPECT_EQ(mlp.status().code(), absl::StatusCode::kFailedPrecondition)
        << mlp.status();
    EXPECT_NE(mlp.status().message().find("device"), absl::string_view::npos)
        << mlp.status();
  }
  // Bad arguments are reported before any device is touched.
  EXPECT_EQ(CudaMlp::Create(Spec({5}), 0, false, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaMlp::Create(Spec({5, 0, 3}), 0, false, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaMlp::Create(Spec({5, 4, 3}), 0, false, 0).status().code(),
            absl::StatusCode::kInvalidArgument);

  absl::StatusOr<PinnedBuffer> empty = PinnedBuffer::Allocate(0);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->data(), nullptr);
  EXPECT_EQ(empty->size(), 0u);
}

// A model on a GPU that does not exist is a status, not a crash.
TEST(CudaBackendNoGpuTest, MakeCudaModelReturnsAStatus) {
  const int count = DeviceCount();
  for (int device : {count, -1}) {
    absl::StatusOr<std::unique_ptr<DeviceModel>> m =
        MakeCudaModel(Spec({784, 256, 128, 10}), device, false, 64);
    ASSERT_FALSE(m.ok()) << "device " << device;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition)
        << m.status();
    EXPECT_NE(m.status().message().find(std::to_string(device)),
              absl::string_view::npos)
        << m.status();
  }
}

// Errors name the CUDA error (name and text) and what was being done.
TEST(CudaBackendNoGpuTest, ErrorsNameTheCudaErrorAndTheAction) {
  EXPECT_TRUE(internal::CudaStatus(cudaSuccess, "anything").ok());
  const absl::Status st =
      internal::CudaStatus(cudaErrorInvalidValue, "copying bucket 3");
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_NE(st.message().find("cudaErrorInvalidValue"), absl::string_view::npos)
      << st;
  EXPECT_NE(st.message().find(cudaGetErrorString(cudaErrorInvalidValue)),
            absl::string_view::npos)
      << st;
  EXPECT_NE(st.message().find("copying bucket 3"), absl::string_view::npos)
      << st;
  const absl::Status bl =
      internal::CublasStatus(CUBLAS_STATUS_INVALID_VALUE, "sgemm of layer 1");
  EXPECT_NE(bl.message().find("CUBLAS_STATUS_INVALID_VALUE"),
            absl::string_view::npos)
      << bl;
  EXPECT_NE(bl.message().find("sgemm of layer 1"), absl::string_view::npos)
      << bl;
}

TEST(CudaBackendNoGpuTest, OptimizerArgumentChecks) {
  OptimizerOptions bad;
  bad.kind = static_cast<OptimizerKind>(99);
  EXPECT_EQ(CudaOptimizer::Create(bad, 10, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = OptimizerOptions();
  bad.lr = -1;
  EXPECT_EQ(CudaOptimizer::Create(bad, 10, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);

  // n == 0 allocates nothing, so the range checks run without a GPU.
  OptimizerOptions adam;
  adam.kind = OptimizerKind::kAdam;
  absl::StatusOr<CudaOptimizer> opt = CudaOptimizer::Create(adam, 0, nullptr);
  ASSERT_TRUE(opt.ok()) << opt.status();
  EXPECT_EQ(opt->Apply(nullptr, nullptr, 0, 0, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
  opt->BeginStep();
  EXPECT_EQ(opt->steps(), 1);
  EXPECT_TRUE(opt->Apply(nullptr, nullptr, 0, 0, nullptr).ok());
  EXPECT_EQ(opt->Apply(nullptr, nullptr, 0, 1, nullptr).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(opt->Apply(nullptr, nullptr, 1, 0, nullptr).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(opt->Apply(nullptr, nullptr, nullptr).ok());  // whole, n = 0
  EXPECT_EQ(opt->steps(), 2);
}

// The scratch size of the two-pass bias gradient, and its argument checks
// (made before any CUDA call).
TEST(CudaBackendNoGpuTest, BiasGradientScratchAndArguments) {
  EXPECT_EQ(BiasGradientScratchFloats(1, 10), 0u);
  EXPECT_EQ(BiasGradientScratchFloats(1024, 10), 0u);   // one tile
  EXPECT_EQ(BiasGradientScratchFloats(1025, 10), 20u);  // two tiles
  EXPECT_EQ(BiasGradientScratchFloats((3 << 20) + 5, 1), 3073u);
  EXPECT_EQ(BiasGradientScratchFloats(5000, 0), 0u);
  EXPECT_EQ(BiasGradient(nullptr, -1, 3, nullptr, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BiasGradient(nullptr, 2000, 3, nullptr, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument)
      << "two tiles without scratch";
}

TEST(CudaBackendGpuTest, DeviceNameIsNonEmpty) {
  if (NoGpu()) GTEST_SKIP() << kNoGpu;
  for (int d = 0; d < DeviceCount(); ++d) {
    EXPECT_FALSE(DeviceName(d).empty()) << "device " << d;
  }
  ASSERT_OK(SetDevice(0));
  absl::StatusOr<PinnedBuffer> buf = PinnedBuffer::Allocate(1000);
  ASSERT_TRUE(buf.ok()) << buf.status();
  ASSERT_NE(buf->data(), nullptr);
  EXPECT_EQ(buf->size(), 1000u);
  buf->data()[999] = 1.0f;
  PinnedBuffer moved = std::move(*buf);
  EXPECT_EQ(moved.data()[999], 1.0f);
  EXPECT_EQ(buf->data(), nullptr);
}

// Host threads waiting for the GPU (TakeLoss, WaitGradCopy) must sleep, not
// spin against the CPU reduction and gRPC threads.
TEST(CudaBackendGpuTest, DevicesUseBlockingSync) {
  if (NoGpu()) GTEST_SKIP() << kNoGpu;
  for (int d = 0; d < DeviceCount(); ++d) {
    absl::StatusOr<std::unique_ptr<CudaMlp>> mlp =
        CudaMlp::Create(Spec({5, 4, 3}), d, false, 8);
    ASSERT_TRUE(mlp.ok()) << mlp.status();
    unsigned flags = 0;
    ASSERT_CUDA_OK(cudaGetDeviceFlags(&flags));
    EXPECT_EQ(flags & cudaDeviceScheduleMask, cudaDeviceScheduleBlockingSync)
        << "device " << d << " flags 0x" << std::hex << flags;
  }
}

// ---------------------------------------------------------------------------
// Element-wise kernels. 3 * 2^20 + 5 elements need a second pass of the
// grid-stride loops (the grid is capped at 8192 blocks of 256 threads).

class CudaKernelsTest : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override {
    if (NoGpu()) GTEST_SKIP() << kNoGpu;
    ASSERT_OK(SetDevice(0));
  }
};

TEST_P(CudaKernelsTest, AddIntoIsBitIdenticalToCpu) {
  const size_t n = GetParam();
  std::vector<float> dst = RandomVec(n, 1, -10, 10);
  const std::vector<float> src = RandomVec(n, 2, -10, 10);
  DevBuf<float> d_dst(n), d_src(n);
  ASSERT_TRUE(d_dst.ok() && d_src.ok());
  d_dst.Upload(dst);
  d_src.Upload(src);
  ASSERT_OK(AddInto(d_dst.get(), d_src.get(), n, nullptr));
  gradsync::AddInto(dst.data(), src.data(), n);
  EXPECT_TRUE(BitwiseEqual(d_dst.Download(), dst));
  EXPECT_TRUE(d_dst.GuardIntact()) << "wrote past n";
}

TEST_P(CudaKernelsTest, ScaleIsBitIdenticalToCpu) {
  const size_t n = GetParam();
  std::vector<float> x = RandomVec(n, 3, -10, 10);
  DevBuf<float> d_x(n);
  ASSERT_TRUE(d_x.ok());
  d_x.Upload(x);
  ASSERT_OK(Scale(d_x.get(), -0.37f, n, nullptr));
  gradsync::Scale(x.data(), -0.37f, n);
  EXPECT_TRUE(BitwiseEqual(d_x.Download(), x));
  EXPECT_TRUE(d_x.GuardIntact()) << "wrote past n";
}

TEST_P(CudaKernelsTest, ReluBackwardIsBitIdenticalToCpu) {
  const size_t n = GetParam();
  std::vector<float> da = RandomVec(n, 4, -1, 1);
  std::vector<float> a = RandomVec(n, 5, -1, 1);
  for (size_t i = 0; i < n; i += 5) a[i] = 0.0f;  // a == 0 masks too
  DevBuf<float> d_da(n), d_a(n);
  ASSERT_TRUE(d_da.ok() && d_a.ok());
  d_da.Upload(da);
  d_a.Upload(a);
  ASSERT_OK(ReluBackward(d_da.get(), d_a.get(), n, nullptr));
  for (size_t i = 0; i < n; ++i) {
    if (a[i] <= 0.0f) da[i] = 0.0f;
  }
  EXPECT_TRUE(BitwiseEqual(d_da.Download(), da));
  EXPECT_TRUE(d_da.GuardIntact()) << "wrote past n";
}

struct OptCase {
  const char* name;
  OptimizerOptions options;
};

std::vector<OptCase> OptCases() {
  OptimizerOptions sgd;
  sgd.kind = OptimizerKind::kSgd;
  sgd.lr = 0.05f;
  sgd.momentum = 0.9f;
  OptimizerOptions plain = sgd;
  plain.momentum = 0.0f;
  OptimizerOptions adam;
  adam.kind = OptimizerKind::kAdam;
  adam.lr = 0.01f;
  adam.beta1 = 0.8f;
  adam.beta2 = 0.99f;
  adam.eps = 1e-6f;
  return {{"sgd_momentum", sgd}, {"sgd_plain", plain}, {"adam", adam}};
}

// Whole-buffer steps, and steps applied as three sub-ranges (BeginStep()
// once per step), both against the CPU optimizer over 5 steps, bit for bit.
// The state is zeroed on a non-blocking stream and applied there.
TEST_P(CudaKernelsTest, OptimizerIsBitIdenticalToCpu) {
  const size_t n = GetParam();
  constexpr int kSteps = 5;
  cudaStream_t stream = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const OptCase& c : OptCases()) {
    for (bool ranged : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (ranged ? " sub-ranges" : " whole"));
      absl::StatusOr<Optimizer> cpu = Optimizer::Create(c.options, n);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      absl::StatusOr<CudaOptimizer> gpu =
          CudaOptimizer::Create(c.options, n, stream);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      EXPECT_EQ(gpu->size(), n);
      std::vector<float> p = RandomVec(n, 10, -1, 1);
      DevBuf<float> d_p(n), d_g(n);
      ASSERT_TRUE(d_p.ok() && d_g.ok());
      d_p.Upload(p);
      for (int step = 0; step < kSteps; ++step) {
        const std::vector<float> g = RandomVec(n, 100 + step, -2, 2);
        d_g.Upload(g);  // synchronous: done before the stream's next work
        if (ranged) {
          gpu->BeginStep();
          // Uneven pieces, applied out of order.
          const std::vector<Range> parts = PartitionEven(n, 3);
          for (int i : {2, 0, 1}) {
            ASSERT_OK(gpu->Apply(d_p.get(), d_g.get(), parts[i].begin,
                                 parts[i].size, stream));
          }
        } else {
          ASSERT_OK(gpu->Apply(d_p.get(), d_g.get(), stream));
        }
        ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
        cpu->Apply(p.data(), g.data());
        EXPECT_EQ(gpu->steps(), cpu->steps());
        EXPECT_TRUE(BitwiseEqual(d_p.Download(), p)) << "step " << step;
      }
      EXPECT_TRUE(d_p.GuardIntact()) << "wrote past n";
    }
  }
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Sizes, CudaKernelsTest,
                         ::testing::Values(size_t{1}, size_t{7}, size_t{1000},
                                           (size_t{1} << 20) + 3,
                                           (size_t{3} << 20) + 5));

// ---------------------------------------------------------------------------
// Matrix kernels on [rows][cols] shapes.

struct Shape {
  int rows;
  int cols;
};

class CudaMatrixKernelsTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    if (NoGpu()) GTEST_SKIP() << kNoGpu;
    ASSERT_OK(SetDevice(0));
  }
};

TEST_P(CudaMatrixKernelsTest, BiasActivationIsBitIdenticalToCpu) {
  const auto [rows, cols] = GetParam();
  const size_t n = static_cast<size_t>(rows) * cols;
  const std::vector<float> b = RandomVec(cols, 21, -0.5f, 0.5f);
  DevBuf<float> d_b(cols);
  ASSERT_TRUE(d_b.ok());
  d_b.Upload(b);
  for (bool relu : {true, false}) {
    SCOPED_TRACE(relu ? "relu" : "linear");
    std::vector<float> z = RandomVec(n, 20, -1, 1);
    DevBuf<float> d_z(n);
    ASSERT_TRUE(d_z.ok());
    d_z.Upload(z);
    ASSERT_OK(BiasActivation(d_z.get(), d_b.get(), rows, cols, relu, nullptr));
    // As worker/mlp.cc.
    for (int r = 0; r < rows; ++r) {
      float* row = z.data() + static_cast<size_t>(r) * cols;
      for (int j = 0; j < cols; ++j) {
        row[j] = relu ? std::max(row[j] + b[j], 0.0f) : row[j] + b[j];
      }
    }
    EXPECT_TRUE(BitwiseEqual(d_z.Download(), z));
    EXPECT_TRUE(d_z.GuardIntact()) << "wrote past rows*cols";
  }
}

// Runs BiasGradient on dz (uploaded) with freshly allocated scratch.
std::vector<float> GpuBiasGradient(const std::vector<float>& dz, int rows,
                                   int cols) {
  DevBuf<float> d_dz(dz.size()), d_gb(cols);
  DevBuf<float> d_scratch(
      std::max<size_t>(BiasGradientScratchFloats(rows, cols), 1));
  EXPECT_TRUE(d_dz.ok() && d_gb.ok() && d_scratch.ok());
  d_dz.Upload(dz);
  const absl::Status st =
      BiasGradient(d_dz.get(), rows, cols, d_gb.get(),
                   BiasGradientScratchFloats(rows, cols) > 0 ? d_scratch.get()
                                                             : nullptr,
                   nullptr);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_TRUE(d_gb.GuardIntact()) << "wrote past cols";
  return d_gb.Download();
}

// worker/mlp.cc's order: row by row, in float.
std::vector<float> CpuBiasGradient(const std::vector<float>& dz, int rows,
                                   int cols) {
  std::vector<float> gb(cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* row = dz.data() + static_cast<size_t>(r) * cols;
    for (int j = 0; j < cols; ++j) gb[j] += row[j];
  }
  return gb;
}

// On multiples of 1/16 in [-1/4, 1/4] every partial sum of up to 3 * 2^20 + 5
// rows is exact in float (|sum| < 2^20, 24 bits), so any order of additions
// gives the CPU's result bit for bit: a missing, doubled or misplaced
// element shows.
TEST_P(CudaMatrixKernelsTest, BiasGradientIsExactOnExactlySummableData) {
  const auto [rows, cols] = GetParam();
  const size_t n = static_cast<size_t>(rows) * cols;
  std::mt19937_64 rng(22);
  std::vector<float> dz(n);
  for (float& v : dz)
    v = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 16.0f;
  EXPECT_TRUE(BitwiseEqual(GpuBiasGradient(dz, rows, cols),
                           CpuBiasGradient(dz, rows, cols)));
}

// Random data: bitwise the same result run to run, and within the error
// bound of its order of additions: every element passes through at most
// 1024 sequential additions in a tile (kBiasRowTile), 8 tree levels and one
// addition per tile, so |got - exact| <= (1024 + 8 + tiles) * 2^-24 *
// sum_r |dz[r][j]|.
TEST_P(CudaMatrixKernelsTest, BiasGradientIsDeterministicAndAccurate) {
  const auto [rows, cols] = GetParam();
  const size_t n = static_cast<size_t>(rows) * cols;
  const std::vector<float> dz = RandomVec(n, 23, -1, 1);
  const std::vector<float> first = GpuBiasGradient(dz, rows, cols);
  EXPECT_TRUE(BitwiseEqual(GpuBiasGradient(dz, rows, cols), first))
      << "not deterministic";
  const double tiles = std::ceil(rows / 1024.0);
  const double gamma = (1024 + 8 + tiles) * std::ldexp(1.0, -24);
  std::vector<double> exact(cols, 0.0), abs_sum(cols, 0.0);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < cols; ++j) {
      exact[j] += dz[static_cast<size_t>(r) * cols + j];
      abs_sum[j] += std::fabs(dz[static_cast<size_t>(r) * cols + j]);
    }
  }
  int bad = 0;
  for (int j = 0; j < cols && bad < 5; ++j) {
    const double err = std::fabs(static_cast<double>(first[j]) - exact[j]);
    if (!(err <= gamma * abs_sum[j])) {
      ADD_FAILURE() << "column " << j << ": got " << first[j] << ", exact "
                    << exact[j] << ", bound " << gamma * abs_sum[j];
      ++bad;
    }
  }
}

// Softmax cross-entropy as worker/mlp.cc computes it, plus the first argmax.
TEST_P(CudaMatrixKernelsTest, SoftmaxCrossEntropyMatchesCpu) {
  const auto [rows, classes] = GetParam();
  const size_t n = static_cast<size_t>(rows) * classes;
  std::vector<float> z = RandomVec(n, 30, -5, 5);
  // Large offsets on some rows: only a max-shifted softmax survives them.
  for (int r = 0; r < rows; r += 3) {
    for (int j = 0; j < classes; ++j) {
      z[static_cast<size_t>(r) * classes + j] += 100.0f;
    }
  }
  std::mt19937_64 rng(31);
  std::vector<uint8_t> y(rows);
  for (int r = 0; r < rows; ++r) {
    y[r] = static_cast<uint8_t>(rng() % std::min(classes, 255));
    if (r % 7 == 3) y[r] = 255;  // out of range unless classes > 255
  }
  const float inv_batch = 1.0f / static_cast<float>(rows);

  std::vector<float> want_d(n);
  std::vector<double> want_loss(rows);
  std::vector<int32_t> want_pred(rows);
  for (int r = 0; r < rows; ++r) {
    const float* zr = z.data() + static_cast<size_t>(r) * classes;
    float* d = want_d.data() + static_cast<size_t>(r) * classes;
    float m = zr[0];
    for (int j = 1; j < classes; ++j) m = std::max(m, zr[j]);
    double s = 0;
    for (int j = 0; j < classes; ++j) {
      s += std::exp(static_cast<double>(zr[j] - m));
    }
    const double lse = std::log(s);
    for (int j = 0; j < classes; ++j) {
      d[j] = static_cast<float>(std::exp(zr[j] - m - lse)) * inv_batch;
    }
    want_loss[r] = 0.0;
    if (y[r] < classes) {
      d[y[r]] -= inv_batch;
      want_loss[r] = lse - static_cast<double>(zr[y[r]] - m);
    }
    want_pred[r] =
        static_cast<int32_t>(std::max_element(zr, zr + classes) - zr);
  }

  DevBuf<float> d_z(n), d_d(n);
  DevBuf<uint8_t> d_y(rows);
  DevBuf<double> d_loss(rows);
  DevBuf<int32_t> d_pred(rows);
  ASSERT_TRUE(d_z.ok() && d_d.ok() && d_y.ok() && d_loss.ok() && d_pred.ok());
  d_z.Upload(z);
  d_y.Upload(y);
  ASSERT_OK(SoftmaxCrossEntropy(d_z.get(), d_y.get(), rows, classes, inv_batch,
                                d_d.get(), d_loss.get(), d_pred.get(),
                                nullptr));
  EXPECT_LE(RelError(d_d.Download(), want_d), 1e-5);
  EXPECT_LE(RelError(d_loss.Download(), want_loss), 1e-5);
  EXPECT_EQ(d_pred.Download(), want_pred);
  EXPECT_TRUE(d_d.GuardIntact() && d_loss.GuardIntact() &&
              d_pred.GuardIntact());

  // Without the optional outputs: loss only, dlogits untouched.
  d_loss.Poison();
  d_d.Poison();
  ASSERT_OK(SoftmaxCrossEntropy(d_z.get(), d_y.get(), rows, classes, inv_batch,
                                nullptr, d_loss.get(), nullptr, nullptr));
  EXPECT_LE(RelError(d_loss.Download(), want_loss), 1e-5);
  const std::vector<float> untouched = d_d.Download();
  EXPECT_TRUE(std::all_of(untouched.begin(), untouched.end(),
                          [](float v) { return std::isnan(v); }));
}

// Includes: more than one bias-gradient tile with a partial last tile and a
// partial column group (2049 x 33), 3073 tiles (3 * 2^20 + 5 rows: a long
// second pass), and 98305 column groups; element counts beyond one
// grid-stride pass.
INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaMatrixKernelsTest,
    ::testing::Values(Shape{1, 1}, Shape{1, 7}, Shape{7, 7}, Shape{1000, 10},
                      Shape{37, 1000}, Shape{2049, 33}, Shape{3, (1 << 20) + 3},
                      Shape{(1 << 20) + 3, 1}, Shape{(3 << 20) + 5, 1},
                      Shape{1, (3 << 20) + 5}),
    [](const ::testing::TestParamInfo<Shape>& info) {
      return std::to_string(info.param.rows) + "x" +
             std::to_string(info.param.cols);
    });

// ---------------------------------------------------------------------------
// CudaMlp vs Mlp.

struct ModelCase {
  std::vector<int> widths;
  int batch;
};

class CudaMlpTest : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    if (NoGpu()) GTEST_SKIP() << kNoGpu;
  }
};

TEST_P(CudaMlpTest, ForwardBackwardMatchesCpu) {
  const MlpSpec spec = Spec(GetParam().widths);
  const int batch = GetParam().batch;
  Mlp cpu(spec);
  const std::vector<float> params = ModelParams(spec, 7);
  const Batch b = WellSeparatedBatch(spec, params, batch, 1000,
                                     /*bad_labels=*/true);

  absl::StatusOr<std::unique_ptr<CudaMlp>> gpu = CudaMlp::Create(
      spec, 0, /*allow_tf32=*/false, /*max_batch=*/std::max(64, batch));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  CudaMlp& mlp = **gpu;
  ASSERT_EQ(mlp.num_params(), cpu.num_params());
  ASSERT_EQ(mlp.num_layers(), cpu.num_layers());
  for (int l = 0; l < cpu.num_layers(); ++l) {
    EXPECT_EQ(mlp.LayerRange(l).begin, cpu.LayerRange(l).begin);
    EXPECT_EQ(mlp.LayerRange(l).size, cpu.LayerRange(l).size);
  }
  ASSERT_OK(mlp.UploadParams(params.data()));
  std::vector<float> round_trip(params.size());
  ASSERT_OK(mlp.DownloadParams(round_trip.data()));
  ASSERT_TRUE(BitwiseEqual(round_trip, params));

  // Poison the gradient: every element must be written.
  ASSERT_CUDA_OK(
      cudaMemset(mlp.grad(), 0xFF, mlp.num_params() * sizeof(float)));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());

  std::vector<float> want(cpu.num_params());
  const float want_loss = cpu.ForwardBackward(params.data(), b.x.data(),
                                              b.y.data(), batch, want.data());

  ASSERT_OK(mlp.StageBatch(b.x.data(), b.y.data(), batch));
  std::vector<int> before, after;
  // After each layer's gradient is enqueued it must be complete in stream
  // order: synchronise and snapshot it.
  std::vector<float> at_hook(mlp.num_params(),
                             std::numeric_limits<float>::quiet_NaN());
  CudaMlp::BackwardHooks hooks;
  hooks.before_layer_grad = [&](int l) {
    before.push_back(l);
    return absl::OkStatus();
  };
  hooks.after_layer_grad = [&](int l) -> absl::Status {
    after.push_back(l);
    absl::Status st = StreamSynchronize(mlp.compute_stream());
    if (!st.ok()) return st;
    const Range r = mlp.LayerRange(l);
    if (cudaMemcpy(at_hook.data() + r.begin, mlp.grad() + r.begin,
                   r.size * sizeof(float),
                   cudaMemcpyDeviceToHost) != cudaSuccess) {
      return absl::InternalError("snapshot copy failed");
    }
    return absl::OkStatus();
  };
  ASSERT_OK(mlp.ForwardBackward(batch, hooks));
  EXPECT_EQ(mlp.pending_losses(), 1);
  absl::StatusOr<float> loss = mlp.TakeLoss();
  ASSERT_TRUE(loss.ok()) << loss.status();
  std::vector<float> got(mlp.num_params());
  ASSERT_OK(mlp.DownloadGrad(got.data()));

  std::vector<int> want_order;
  for (int l = cpu.num_layers() - 1; l >= 0; --l) want_order.push_back(l);
  EXPECT_EQ(before, want_order);
  EXPECT_EQ(after, want_order);
  EXPECT_NEAR(*loss, want_loss, 1e-5 * std::fabs(want_loss)) << "loss";
  // Both sides round sums over the batch in different orders; the error
  // grows like sqrt(batch).
  const double tol = 1e-5 * std::max(1.0, std::sqrt(batch / 37.0));
  std::string where;
  EXPECT_LE(WorstSegmentError(spec, got, want, &where), tol) << where;
  EXPECT_LE(WorstSegmentError(spec, at_hook, want, &where), tol)
      << "snapshot at after_layer_grad: " << where;

  // Same params and batch again (the staged batch is reusable); no hooks.
  // The GPU is deterministic: bitwise the same gradient, not accumulated.
  ASSERT_CUDA_OK(
      cudaMemset(mlp.grad(), 0xFF, mlp.num_params() * sizeof(float)));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_OK(mlp.ForwardBackward(batch));
  loss = mlp.TakeLoss();
  ASSERT_TRUE(loss.ok()) << loss.status();
  std::vector<float> again(mlp.num_params());
  ASSERT_OK(mlp.DownloadGrad(again.data()));
  EXPECT_TRUE(BitwiseEqual(again, got)) << "not deterministic, or accumulated";

  // A failing hook stops the step with its error.
  hooks.after_layer_grad = [](int) {
    return absl::AbortedError("hook failed");
  };
  EXPECT_EQ(mlp.ForwardBackward(batch, hooks).code(),
            absl::StatusCode::kAborted);
  ASSERT_TRUE(mlp.TakeLoss().ok());
}

// At most kMaxPendingLosses losses wait to be taken; they come out oldest
// first.
TEST_P(CudaMlpTest, LossesAreTakenInOrder) {
  const MlpSpec spec = Spec(GetParam().widths);
  const int batch = GetParam().batch;
  Mlp cpu(spec);
  const std::vector<float> params = ModelParams(spec, 8);
  absl::StatusOr<std::unique_ptr<CudaMlp>> gpu =
      CudaMlp::Create(spec, 0, false, batch);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  CudaMlp& mlp = **gpu;
  ASSERT_OK(mlp.UploadParams(params.data()));
  EXPECT_EQ(mlp.TakeLoss().status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(mlp.ForwardBackward(batch).code(),
            absl::StatusCode::kFailedPrecondition)
      << "nothing staged";

  std::vector<float> want_loss;
  std::vector<float> scratch(cpu.num_params());
  for (int i = 0; i < 4; ++i) {
    const Batch b = RandomBatch(spec, batch, 2500 + 10 * i);
    want_loss.push_back(cpu.ForwardBackward(params.data(), b.x.data(),
                                            b.y.data(), batch, scratch.data()));
    ASSERT_OK(mlp.StageBatch(b.x.data(), b.y.data(), batch));
    ASSERT_OK(mlp.ForwardBackward(batch));
    if (i == 1) {
      EXPECT_EQ(mlp.pending_losses(), CudaMlp::kMaxPendingLosses);
      EXPECT_EQ(mlp.ForwardBackward(batch).code(),
                absl::StatusCode::kFailedPrecondition);
      for (int k = 0; k < 2; ++k) {
        absl::StatusOr<float> loss = mlp.TakeLoss();
        ASSERT_TRUE(loss.ok()) << loss.status();
        EXPECT_NEAR(*loss, want_loss[k], 1e-5 * std::fabs(want_loss[k]));
      }
    }
  }
  // Steps 2 and 3 pending: one late, as the training loop reads them.
  for (int k = 2; k < 4; ++k) {
    absl::StatusOr<float> loss = mlp.TakeLoss();
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_NEAR(*loss, want_loss[k], 1e-5 * std::fabs(want_loss[k]));
  }
  EXPECT_EQ(mlp.pending_losses(), 0);
}

// Staging batch t+1 while batch t computes: every step must see its own
// batch, and Evaluate must not disturb the staged batch.
TEST_P(CudaMlpTest, DoubleBufferedStagingKeepsBatchesApart) {
  const MlpSpec spec = Spec(GetParam().widths);
  const int batch = GetParam().batch;
  Mlp cpu(spec);
  const std::vector<float> params = ModelParams(spec, 8);
  absl::StatusOr<std::unique_ptr<CudaMlp>> gpu =
      CudaMlp::Create(spec, 0, false, /*max_batch=*/batch);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  CudaMlp& mlp = **gpu;
  ASSERT_OK(mlp.UploadParams(params.data()));

  constexpr int kBatches = 6;
  std::vector<Batch> batches;
  std::vector<float> want_loss;
  std::vector<float> scratch(cpu.num_params());
  for (int i = 0; i < kBatches; ++i) {
    batches.push_back(RandomBatch(spec, batch, 2000 + 10 * i));
    want_loss.push_back(cpu.ForwardBackward(params.data(), batches[i].x.data(),
                                            batches[i].y.data(), batch,
                                            scratch.data()));
  }
  EXPECT_EQ(
      mlp.StageBatch(batches[0].x.data(), batches[0].y.data(), batch + 1)
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(mlp.StageBatch(batches[0].x.data(), batches[0].y.data(), 0).code(),
            absl::StatusCode::kInvalidArgument);

  // Pipelined as the training loop does it: stage i+1 right after
  // ForwardBackward(i) returned (it still runs), from a host buffer that is
  // clobbered right away; take loss i-1 after that.
  std::vector<float> x = batches[0].x;
  std::vector<uint8_t> y = batches[0].y;
  ASSERT_OK(mlp.StageBatch(x.data(), y.data(), batch));
  for (int i = 0; i < kBatches; ++i) {
    ASSERT_OK(mlp.ForwardBackward(batch));
    std::fill(x.begin(), x.end(), std::numeric_limits<float>::quiet_NaN());
    if (i + 1 < kBatches) {
      x = batches[i + 1].x;
      y = batches[i + 1].y;
      ASSERT_OK(mlp.StageBatch(x.data(), y.data(), batch));
      std::fill(x.begin(), x.end(), std::numeric_limits<float>::quiet_NaN());
      std::fill(y.begin(), y.end(), uint8_t{0});
    }
    if (i > 0) {
      absl::StatusOr<float> loss = mlp.TakeLoss();
      ASSERT_TRUE(loss.ok()) << loss.status();
      EXPECT_NEAR(*loss, want_loss[i - 1], 1e-5 * std::fabs(want_loss[i - 1]))
          << "batch " << i - 1;
    }
  }
  absl::StatusOr<float> last = mlp.TakeLoss();
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_NEAR(*last, want_loss.back(), 1e-5 * std::fabs(want_loss.back()));
  if (batch > 1) {
    EXPECT_EQ(mlp.ForwardBackward(batch - 1).code(),
              absl::StatusCode::kInvalidArgument);
  }

  // Two stagings in a row: the second one wins. Evaluate in between leaves
  // it alone.
  ASSERT_OK(mlp.StageBatch(batches[1].x.data(), batches[1].y.data(), batch));
  ASSERT_OK(mlp.StageBatch(batches[2].x.data(), batches[2].y.data(), batch));
  ASSERT_TRUE(
      mlp.Evaluate(batches[3].x.data(), batches[3].y.data(), batch).ok());
  ASSERT_OK(mlp.ForwardBackward(batch));
  absl::StatusOr<float> loss = mlp.TakeLoss();
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, want_loss[2], 1e-5 * std::fabs(want_loss[2]));
}

// Three evaluation blocks (the slot of block 0 is reused by block 2) and a
// partial last one.
TEST_P(CudaMlpTest, EvaluateMatchesCpu) {
  const MlpSpec spec = Spec(GetParam().widths);
  Mlp cpu(spec);
  const std::vector<float> params = ModelParams(spec, 9);
  const int64_t n = 2 * CudaMlp::kEvalBlockRows + 5;
  const Batch b = RandomBatch(spec, static_cast<int>(n), 3000,
                              /*bad_labels=*/true);
  absl::StatusOr<std::unique_ptr<CudaMlp>> gpu =
      CudaMlp::Create(spec, 0, false, /*max_batch=*/64);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_OK((*gpu)->UploadParams(params.data()));

  for (int64_t count : {int64_t{1000}, n}) {  // grows the block buffers
    SCOPED_TRACE(count);
    const Mlp::Eval want =
        cpu.Evaluate(params.data(), b.x.data(), b.y.data(), count);
    absl::StatusOr<std::pair<double, int64_t>> got =
        (*gpu)->Evaluate(b.x.data(), b.y.data(), count);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NEAR(got->first, want.mean_loss, 1e-5 * std::fabs(want.mean_loss));
    // Logits agree to ~1e-6; an argmax may flip only on a near-tie.
    EXPECT_NEAR(static_cast<double>(got->second),
                static_cast<double>(want.correct), 1e-4 * count + 1);
  }
  absl::StatusOr<std::pair<double, int64_t>> got =
      (*gpu)->Evaluate(b.x.data(), b.y.data(), 0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->first, 0.0);
  EXPECT_EQ(got->second, 0);
}

// 20 optimizer steps on the same batches, CPU (Mlp + Optimizer) vs GPU
// (CudaMlp + CudaOptimizer on the compute stream).
TEST_P(CudaMlpTest, TwentySgdStepsMatchCpu) {
  const MlpSpec spec = Spec(GetParam().widths);
  const int batch = GetParam().batch;
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.lr = 0.05f;
  o.momentum = 0.9f;
  Mlp cpu(spec);
  std::vector<float> p_cpu = ModelParams(spec, 11);
  absl::StatusOr<Optimizer> opt_cpu = Optimizer::Create(o, cpu.num_params());
  ASSERT_TRUE(opt_cpu.ok());
  absl::StatusOr<std::unique_ptr<CudaMlp>> gpu =
      CudaMlp::Create(spec, 0, false, batch);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  CudaMlp& mlp = **gpu;
  absl::StatusOr<CudaOptimizer> opt_gpu =
      CudaOptimizer::Create(o, mlp.num_params(), mlp.compute_stream());
  ASSERT_TRUE(opt_gpu.ok()) << opt_gpu.status();
  ASSERT_OK(mlp.UploadParams(p_cpu.data()));

  std::vector<float> g_cpu(cpu.num_params());
  for (int step = 0; step < 20; ++step) {
    const Batch b = RandomBatch(spec, batch, 4000 + 10 * step);
    const float want_loss = cpu.ForwardBackward(
        p_cpu.data(), b.x.data(), b.y.data(), batch, g_cpu.data());
    opt_cpu->Apply(p_cpu.data(), g_cpu.data());
    ASSERT_OK(mlp.StageBatch(b.x.data(), b.y.data(), batch));
    ASSERT_OK(mlp.ForwardBackward(batch));
    ASSERT_OK(opt_gpu->Apply(mlp.params(), mlp.grad(), mlp.compute_stream()));
    absl::StatusOr<float> loss = mlp.TakeLoss();
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_NEAR(*loss, want_loss, 1e-4 * std::fabs(want_loss))
        << "step " << step;
  }
  std::vector<float> p_gpu(mlp.num_params());
  ASSERT_OK(mlp.DownloadParams(p_gpu.data()));
  std::string where;
  EXPECT_LE(WorstSegmentError(spec, p_gpu, p_cpu, &where), 1e-4) << where;
}

// Per-layer (bucketed) optimizer application — BeginStep() once, then
// Apply per LayerRange in the backward order on a second stream that waits
// for the whole backward — must equal whole-buffer steps bit for bit (same
// GPU, same gradients). Adam, so the shared step counter matters.
TEST_P(CudaMlpTest, PerLayerAdamEqualsWholeBufferAdam) {
  const MlpSpec spec = Spec(GetParam().widths);
  const int batch = GetParam().batch;
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.lr = 0.01f;
  const std::vector<float> init = ModelParams(spec, 12);
  absl::StatusOr<std::unique_ptr<CudaMlp>> whole =
      CudaMlp::Create(spec, 0, false, batch);
  absl::StatusOr<std::unique_ptr<CudaMlp>> layered =
      CudaMlp::Create(spec, 0, false, batch);
  ASSERT_TRUE(whole.ok() && layered.ok());
  cudaStream_t side = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  absl::StatusOr<CudaOptimizer> opt_whole = CudaOptimizer::Create(
      o, (*whole)->num_params(), (*whole)->compute_stream());
  absl::StatusOr<CudaOptimizer> opt_layered =
      CudaOptimizer::Create(o, (*layered)->num_params(), side);
  ASSERT_TRUE(opt_whole.ok() && opt_layered.ok());
  ASSERT_OK((*whole)->UploadParams(init.data()));
  ASSERT_OK((*layered)->UploadParams(init.data()));

  const int layers = (*layered)->num_layers();
  std::vector<cudaEvent_t> grad_ready(layers, nullptr);
  for (cudaEvent_t& e : grad_ready) {
    ASSERT_CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  cudaEvent_t updated = nullptr;
  ASSERT_CUDA_OK(cudaEventCreateWithFlags(&updated, cudaEventDisableTiming));
  CudaMlp& lm = **layered;
  auto compute = static_cast<cudaStream_t>(lm.compute_stream());
  CudaMlp::BackwardHooks hooks;
  hooks.after_layer_grad = [&](int l) {
    return internal::CudaStatus(cudaEventRecord(grad_ready[l], compute),
                                "recording grad_ready");
  };

  for (int step = 0; step < 20; ++step) {
    const Batch b = RandomBatch(spec, batch, 5000 + 10 * step);
    ASSERT_OK((*whole)->StageBatch(b.x.data(), b.y.data(), batch));
    ASSERT_OK((*whole)->ForwardBackward(batch));
    ASSERT_OK(opt_whole->Apply((*whole)->params(), (*whole)->grad(),
                               (*whole)->compute_stream()));
    ASSERT_TRUE((*whole)->TakeLoss().ok());

    ASSERT_OK(lm.StageBatch(b.x.data(), b.y.data(), batch));
    ASSERT_OK(lm.ForwardBackward(batch, hooks));
    ASSERT_TRUE(lm.TakeLoss().ok());
    // Updates start only after the whole backward has been enqueued: W_l is
    // still read by the backward of layer l-1.
    ASSERT_CUDA_OK(cudaStreamWaitEvent(side, grad_ready[0], 0));
    opt_layered->BeginStep();
    for (int l = layers - 1; l >= 0; --l) {
      const Range r = lm.LayerRange(l);
      ASSERT_OK(
          opt_layered->Apply(lm.params(), lm.grad(), r.begin, r.size, side));
    }
    // The next forward must see the updated params.
    ASSERT_CUDA_OK(cudaEventRecord(updated, side));
    ASSERT_CUDA_OK(cudaStreamWaitEvent(compute, updated, 0));
  }
  EXPECT_EQ(opt_layered->steps(), opt_whole->steps());
  std::vector<float> pw((*whole)->num_params()), pl(lm.num_params());
  ASSERT_OK((*whole)->DownloadParams(pw.data()));
  ASSERT_OK(lm.DownloadParams(pl.data()));
  EXPECT_TRUE(BitwiseEqual(pl, pw));
  for (cudaEvent_t e : grad_ready) cudaEventDestroy(e);
  cudaEventDestroy(updated);
  cudaStreamDestroy(side);
}

TEST_P(CudaMlpTest, Tf32ForwardBackwardIsClose) {
  // TF32 rounds GEMM inputs to 10 mantissa bits: only a loose check.
  const MlpSpec spec = Spec(GetParam().widths);
  const int batch = GetParam().batch;
  Mlp cpu(spec);
  const std::vector<float> params = ModelParams(spec, 13);
  const Batch b = RandomBatch(spec, batch, 6000);
  absl::StatusOr<std::unique_ptr<CudaMlp>> gpu =
      CudaMlp::Create(spec, 0, /*allow_tf32=*/true, batch);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_OK((*gpu)->UploadParams(params.data()));
  std::vector<float> g(cpu.num_params());
  const float want = cpu.ForwardBackward(params.data(), b.x.data(), b.y.data(),
                                         batch, g.data());
  ASSERT_OK((*gpu)->StageBatch(b.x.data(), b.y.data(), batch));
  ASSERT_OK((*gpu)->ForwardBackward(batch));
  absl::StatusOr<float> loss = (*gpu)->TakeLoss();
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, want, 1e-2 * std::fabs(want));
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaMlpTest,
    ::testing::Values(ModelCase{{784, 256, 128, 10}, 37},
                      ModelCase{{5, 4, 3}, 37}, ModelCase{{5, 4, 3}, 1},
                      ModelCase{{64, 32, 16, 10}, 37},
                      // More rows than one bias-gradient tile.
                      ModelCase{{20, 16, 10}, 2500}),
    [](const ::testing::TestParamInfo<ModelCase>& info) {
      std::string name = "mlp";
      for (int w : info.param.widths) name += "_" + std::to_string(w);
      return name + "_batch" + std::to_string(info.param.batch);
    });

// ---------------------------------------------------------------------------
// CudaModel through the DeviceModel interface, driven as the training loop
// drives it.

class CudaModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (NoGpu()) GTEST_SKIP() << kNoGpu;
  }
};

TEST_F(CudaModelTest, ConfigureAndCopiesCheckTheirArguments) {
  const MlpSpec spec = Spec({5, 4, 3});
  absl::StatusOr<std::unique_ptr<DeviceModel>> m =
      MakeCudaModel(spec, 0, false, 8);
  ASSERT_TRUE(m.ok()) << m.status();
  DeviceModel& model = **m;
  float host[64] = {};
  EXPECT_EQ(model.StartGradCopy(0, 0, host).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(model.ForwardBackward(1, [](int) {}).code(),
            absl::StatusCode::kFailedPrecondition);
  const std::vector<Range> buckets = MakeBuckets(model, 1 << 20);
  OptimizerOptions sgd;
  EXPECT_EQ(model.Configure(buckets, sgd, 0).code(),
            absl::StatusCode::kInvalidArgument);
  // Not at a layer boundary; not covering everything; wrong order.
  const size_t n = model.num_params();
  EXPECT_EQ(model.Configure({Range{1, n - 1}, Range{0, 1}}, sgd, 2).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.Configure({model.LayerRange(1)}, sgd, 2).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      model.Configure({model.LayerRange(0), model.LayerRange(1)}, sgd, 2)
          .code(),
      absl::StatusCode::kInvalidArgument);
  ASSERT_OK(
      model.Configure({model.LayerRange(1), model.LayerRange(0)}, sgd, 2));
  EXPECT_EQ(model.StartGradCopy(2, 0, host).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.StartGradCopy(0, 2, host).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.WaitGradCopy(0, -1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.TakeLoss().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// The training loop's order, with a model whose big buckets take far longer
// to copy than the next backward takes to overwrite them:
//   ForwardBackward(t) (bucket_ready(b) -> StartGradCopy(b, t % 2, slot)),
//   StageBatch(t+1) at once — step t still in flight — from a host buffer
//   clobbered right after, TakeLoss(t-1), then (the copy thread's part)
//   WaitGradCopy for step t-1's buckets, whose slot step t+1 reuses.
// Every copied gradient and every loss must be its own batch's, against the
// CPU model on the same parameters (no optimizer step: the parameters stay
// put).
TEST_F(CudaModelTest, GradientsOfInFlightStepsStayApart) {
  const MlpSpec spec = Spec({784, 1024, 1024, 10});
  constexpr int kBatch = 37;
  constexpr int kSteps = 6;
  constexpr int kSlots = 2;
  const std::vector<float> params = ModelParams(spec, 14);
  Mlp cpu(spec);
  std::vector<Batch> batches;
  std::vector<std::vector<float>> want_grad;
  std::vector<float> want_loss;
  for (int t = 0; t < kSteps; ++t) {
    batches.push_back(WellSeparatedBatch(spec, params, kBatch, 7000 + 300 * t,
                                         /*bad_labels=*/false));
    want_grad.emplace_back(cpu.num_params());
    want_loss.push_back(cpu.ForwardBackward(params.data(),
                                            batches[t].x.data(),
                                            batches[t].y.data(), kBatch,
                                            want_grad.back().data()));
  }

  absl::StatusOr<std::unique_ptr<DeviceModel>> m =
      MakeCudaModel(spec, 0, false, kBatch);
  ASSERT_TRUE(m.ok()) << m.status();
  DeviceModel& model = **m;
  const std::vector<Range> buckets = MakeBuckets(model, 1 << 20);
  ASSERT_GE(buckets.size(), 2u);
  OptimizerOptions sgd;
  ASSERT_OK(model.Configure(buckets, sgd, kSlots));
  ASSERT_OK(model.SetParams(params.data()));
  std::vector<std::shared_ptr<float>> slots;
  for (int k = 0; k < kSlots; ++k) {
    absl::StatusOr<std::shared_ptr<float>> s =
        model.AllocHost(model.num_params());
    ASSERT_TRUE(s.ok()) << s.status();
    std::fill(s->get(), s->get() + model.num_params(),
              std::numeric_limits<float>::quiet_NaN());
    slots.push_back(*s);
  }

  auto check_step = [&](int t) {
    SCOPED_TRACE(testing::Message() << "step " << t);
    for (size_t b = 0; b < buckets.size(); ++b) {
      ASSERT_OK(model.WaitGradCopy(static_cast<int>(b), t % kSlots));
    }
    std::string where;
    EXPECT_LE(WorstSegmentError(spec, slots[t % kSlots].get(),
                                want_grad[t].data(), &where),
              1e-5)
        << where;
    std::fill(slots[t % kSlots].get(),
              slots[t % kSlots].get() + model.num_params(),
              std::numeric_limits<float>::quiet_NaN());
  };
  auto take_loss = [&](int t) {
    absl::StatusOr<float> loss = model.TakeLoss();
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_NEAR(*loss, want_loss[t], 1e-5 * std::fabs(want_loss[t]))
        << "step " << t;
  };

  std::vector<float> x = batches[0].x;
  std::vector<uint8_t> y = batches[0].y;
  ASSERT_OK(model.StageBatch(x.data(), y.data(), kBatch));
  for (int t = 0; t < kSteps; ++t) {
    std::vector<int> ready;
    absl::Status copy_status;
    ASSERT_OK(model.ForwardBackward(kBatch, [&](int b) {
      ready.push_back(b);
      absl::Status st = model.StartGradCopy(
          b, t % kSlots, slots[t % kSlots].get() + buckets[b].begin);
      if (copy_status.ok()) copy_status = st;
    }));
    ASSERT_OK(copy_status);
    ASSERT_EQ(ready.size(), buckets.size());
    for (size_t b = 0; b < ready.size(); ++b) EXPECT_EQ(ready[b], int(b));
    if (t + 1 < kSteps) {
      x = batches[t + 1].x;
      y = batches[t + 1].y;
      ASSERT_OK(model.StageBatch(x.data(), y.data(), kBatch));
      std::fill(x.begin(), x.end(), std::numeric_limits<float>::quiet_NaN());
      std::fill(y.begin(), y.end(), uint8_t{0});
    }
    if (t > 0) {
      take_loss(t - 1);
      check_step(t - 1);
    }
  }
  take_loss(kSteps - 1);
  check_step(kSteps - 1);
}

// ApplyGradient and SetParamsRange return before the device has run them;
// GetParams sees both, in order, as on the CPU model: one SGD step with lr 1
// on a known gradient (p - g, bit for bit), then a parameter range replaced.
TEST_F(CudaModelTest, AppliedStepsAndRangesAreOrdered) {
  const MlpSpec spec = Spec({64, 32, 16, 10});
  constexpr int kBatch = 37;
  const std::vector<float> params = ModelParams(spec, 15);
  absl::StatusOr<std::unique_ptr<DeviceModel>> gpu =
      MakeCudaModel(spec, 0, false, kBatch);
  absl::StatusOr<std::unique_ptr<DeviceModel>> cpu = MakeCpuModel(spec);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const std::vector<Range> buckets = MakeBuckets(**gpu, 1 << 10);
  OptimizerOptions sgd;
  sgd.kind = OptimizerKind::kSgd;
  sgd.lr = 1.0f;
  sgd.momentum = 0.0f;
  const size_t n = (*gpu)->num_params();
  std::vector<float> g_host = RandomVec(n, 16, -0.01f, 0.01f);
  std::vector<float> other = ModelParams(spec, 17);
  std::vector<float> got(n), want(n);
  for (DeviceModel* m : {gpu->get(), cpu->get()}) {
    ASSERT_OK(m->Configure(buckets, sgd, 2));
    ASSERT_OK(m->SetParams(params.data()));
    absl::StatusOr<std::shared_ptr<float>> g = m->AllocHost(n);
    absl::StatusOr<std::shared_ptr<float>> p = m->AllocHost(n);
    ASSERT_TRUE(g.ok() && p.ok());
    std::copy(g_host.begin(), g_host.end(), g->get());
    std::copy(other.begin(), other.end(), p->get());
    for (size_t b = 0; b < buckets.size(); ++b) {
      ASSERT_OK(
          m->ApplyGradient(static_cast<int>(b), g->get() + buckets[b].begin));
    }
    ASSERT_OK(m->SetParamsRange(buckets.back(), p->get()));
    ASSERT_OK(m->GetParams(m == gpu->get() ? got.data() : want.data()));
  }
  // Both compute p - 1 * g per element in float, then the range replaced.
  EXPECT_TRUE(BitwiseEqual(got, want));
}

}  // namespace
}  // namespace cuda
}  // namespace gradsync
