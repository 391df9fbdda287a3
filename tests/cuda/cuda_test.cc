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

#include <cstring>
#include <string>
#include <vector>

#include "tests/cuda/cuda_test_util.h"

namespace gradsync {
namespace cuda {
namespace {

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
    EXPECT_EQ(mlp.status().code(), absl::StatusCode::kFailedPrecondition) << mlp.status();
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
    EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition) << m.status();
    EXPECT_NE(m.status().message().find(std::to_string(device)), absl::string_view::npos)
        << m.status();
  }
}

// Errors name the CUDA error (name and text) and what was being done.
TEST(CudaBackendNoGpuTest, ErrorsNameTheCudaErrorAndTheAction) {
  EXPECT_TRUE(internal::CudaStatus(cudaSuccess, "anything").ok());
  const absl::Status st = internal::CudaStatus(cudaErrorInvalidValue, "copying bucket 3");
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_NE(st.message().find("cudaErrorInvalidValue"), absl::string_view::npos) << st;
  EXPECT_NE(st.message().find(cudaGetErrorString(cudaErrorInvalidValue)),
            absl::string_view::npos)
      << st;
  EXPECT_NE(st.message().find("copying bucket 3"), absl::string_view::npos) << st;
  const absl::Status bl =
      internal::CublasStatus(CUBLAS_STATUS_INVALID_VALUE, "sgemm of layer 1");
  EXPECT_NE(bl.message().find("CUBLAS_STATUS_INVALID_VALUE"), absl::string_view::npos)
      << bl;
  EXPECT_NE(bl.message().find("sgemm of layer 1"), absl::string_view::npos) << bl;
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
      absl::StatusOr<CudaOptimizer> gpu = CudaOptimizer::Create(c.options, n, stream);
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
            ASSERT_OK(
                gpu->Apply(d_p.get(), d_g.get(), parts[i].begin, parts[i].size, stream));
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
                                           (size_t{1} << 20) + 3, (size_t{3} << 20) + 5));

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
std::vector<float> GpuBiasGradient(const std::vector<float>& dz, int rows, int cols) {
  DevBuf<float> d_dz(dz.size()), d_gb(cols);
  DevBuf<float> d_scratch(std::max<size_t>(BiasGradientScratchFloats(rows, cols), 1));
  EXPECT_TRUE(d_dz.ok() && d_gb.ok() && d_scratch.ok());
  d_dz.Upload(dz);
  const absl::Status st = BiasGradient(
      d_dz.get(), rows, cols, d_gb.get(),
      BiasGradientScratchFloats(rows, cols) > 0 ? d_scratch.get() : nullptr, nullptr);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_TRUE(d_gb.GuardIntact()) << "wrote past cols";
  return d_gb.Download();
}

// worker/mlp.cc's order: row by row, in float.
std::vector<float> CpuBiasGradient(const std::vector<float>& dz, int rows, int cols) {
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
  for (float& v : dz) v = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 16.0f;
  EXPECT_TRUE(
      BitwiseEqual(GpuBiasGradient(dz, rows, cols), CpuBiasGradient(dz, rows, cols)));
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
      ADD_FAILURE() << "column " << j << ": got " << first[j] << ", exact " << exact[j]
                    << ", bound " << gamma * abs_sum[j];
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
    want_pred[r] = static_cast<int32_t>(std::max_element(zr, zr + classes) - zr);
  }

  DevBuf<float> d_z(n), d_d(n);
  DevBuf<uint8_t> d_y(rows);
  DevBuf<double> d_loss(rows);
  DevBuf<int32_t> d_pred(rows);
  ASSERT_TRUE(d_z.ok() && d_d.ok() && d_y.ok() && d_loss.ok() && d_pred.ok());
  d_z.Upload(z);
  d_y.Upload(y);
  ASSERT_OK(SoftmaxCrossEntropy(d_z.get(), d_y.get(), rows, classes, inv_batch, d_d.get(),
                                d_loss.get(), d_pred.get(), nullptr));
  EXPECT_LE(RelError(d_d.Download(), want_d), 1e-5);
  EXPECT_LE(RelError(d_loss.Download(), want_loss), 1e-5);
  EXPECT_EQ(d_pred.Download(), want_pred);
  EXPECT_TRUE(d_d.GuardIntact() && d_loss.GuardIntact() && d_pred.GuardIntact());

  // Without the optional outputs: loss only, dlogits untouched.
  d_loss.Poison();
  d_d.Poison();
  ASSERT_OK(SoftmaxCrossEntropy(d_z.get(), d_y.get(), rows, classes, inv_batch, nullptr,
                                d_loss.get(), nullptr, nullptr));
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
      return std::to_string(info.param.rows) + "x" + std::to_string(info.param.cols);
    });

}  // namespace
}  // namespace cuda
}  // namespace gradsync
