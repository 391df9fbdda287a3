// Tests of the CUDA MLP (CudaMlp against the CPU Mlp); how results are
// compared: cuda_test.cc. Each test skips without a GPU.

#include <cstring>
#include <string>
#include <vector>

#include "tests/cuda/cuda_test_util.h"

namespace gradsync {
namespace cuda {
namespace {

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

  absl::StatusOr<std::unique_ptr<CudaMlp>> gpu =
      CudaMlp::Create(spec, 0, /*allow_tf32=*/false, /*max_batch=*/std::max(64, batch));
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
  ASSERT_CUDA_OK(cudaMemset(mlp.grad(), 0xFF, mlp.num_params() * sizeof(float)));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());

  std::vector<float> want(cpu.num_params());
  const float want_loss =
      cpu.ForwardBackward(params.data(), b.x.data(), b.y.data(), batch, want.data());

  ASSERT_OK(mlp.StageBatch(b.x.data(), b.y.data(), batch));
  std::vector<int> before, after;
  // After each layer's gradient is enqueued it must be complete in stream
  // order: synchronise and snapshot it.
  std::vector<float> at_hook(mlp.num_params(), std::numeric_limits<float>::quiet_NaN());
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
    if (cudaMemcpy(at_hook.data() + r.begin, mlp.grad() + r.begin, r.size * sizeof(float),
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
  ASSERT_CUDA_OK(cudaMemset(mlp.grad(), 0xFF, mlp.num_params() * sizeof(float)));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_OK(mlp.ForwardBackward(batch));
  loss = mlp.TakeLoss();
  ASSERT_TRUE(loss.ok()) << loss.status();
  std::vector<float> again(mlp.num_params());
  ASSERT_OK(mlp.DownloadGrad(again.data()));
  EXPECT_TRUE(BitwiseEqual(again, got)) << "not deterministic, or accumulated";

  // A failing hook stops the step with its error.
  hooks.after_layer_grad = [](int) { return absl::AbortedError("hook failed"); };
  EXPECT_EQ(mlp.ForwardBackward(batch, hooks).code(), absl::StatusCode::kAborted);
  ASSERT_TRUE(mlp.TakeLoss().ok());
}

// At most kMaxPendingLosses losses wait to be taken; they come out oldest
// first.
TEST_P(CudaMlpTest, LossesAreTakenInOrder) {
  const MlpSpec spec = Spec(GetParam().widths);
  const int batch = GetParam().batch;
  Mlp cpu(spec);
  const std::vector<float> params = ModelParams(spec, 8);
  absl::StatusOr<std::unique_ptr<CudaMlp>> gpu = CudaMlp::Create(spec, 0, false, batch);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  CudaMlp& mlp = **gpu;
  ASSERT_OK(mlp.UploadParams(params.data()));
  EXPECT_EQ(mlp.TakeLoss().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(mlp.ForwardBackward(batch).code(), absl::StatusCode::kFailedPrecondition)
      << "nothing staged";

  std::vector<float> want_loss;
  std::vector<float> scratch(cpu.num_params());
  for (int i = 0; i < 4; ++i) {
    const Batch b = RandomBatch(spec, batch, 2500 + 10 * i);
    want_loss.push_back(cpu.ForwardBackward(params.data(), b.x.data(), b.y.data(), batch,
                                            scratch.data()));
    ASSERT_OK(mlp.StageBatch(b.x.data(), b.y.data(), batch));
    ASSERT_OK(mlp.ForwardBackward(batch));
    if (i == 1) {
      EXPECT_EQ(mlp.pending_losses(), CudaMlp::kMaxPendingLosses);
      EXPECT_EQ(mlp.ForwardBackward(batch).code(), absl::StatusCode::kFailedPrecondition);
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
                                            batches[i].y.data(), batch, scratch.data()));
  }
  EXPECT_EQ(mlp.StageBatch(batches[0].x.data(), batches[0].y.data(), batch + 1).code(),
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
    EXPECT_EQ(mlp.ForwardBackward(batch - 1).code(), absl::StatusCode::kInvalidArgument);
  }

  // Two stagings in a row: the second one wins. Evaluate in between leaves
  // it alone.
  ASSERT_OK(mlp.StageBatch(batches[1].x.data(), batches[1].y.data(), batch));
  ASSERT_OK(mlp.StageBatch(batches[2].x.data(), batches[2].y.data(), batch));
  ASSERT_TRUE(mlp.Evaluate(batches[3].x.data(), batches[3].y.data(), batch).ok());
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
    const EvalResult want = cpu.Evaluate(params.data(), b.x.data(), b.y.data(), count);
    absl::StatusOr<std::pair<double, int64_t>> got =
        (*gpu)->Evaluate(b.x.data(), b.y.data(), count);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NEAR(got->first, want.mean_loss, 1e-5 * std::fabs(want.mean_loss));
    // Logits agree to ~1e-6; an argmax may flip only on a near-tie.
    EXPECT_NEAR(static_cast<double>(got->second), static_cast<double>(want.correct),
                1e-4 * count + 1);
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
  absl::StatusOr<std::unique_ptr<CudaMlp>> gpu = CudaMlp::Create(spec, 0, false, batch);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  CudaMlp& mlp = **gpu;
  absl::StatusOr<CudaOptimizer> opt_gpu =
      CudaOptimizer::Create(o, mlp.num_params(), mlp.compute_stream());
  ASSERT_TRUE(opt_gpu.ok()) << opt_gpu.status();
  ASSERT_OK(mlp.UploadParams(p_cpu.data()));

  std::vector<float> g_cpu(cpu.num_params());
  for (int step = 0; step < 20; ++step) {
    const Batch b = RandomBatch(spec, batch, 4000 + 10 * step);
    const float want_loss =
        cpu.ForwardBackward(p_cpu.data(), b.x.data(), b.y.data(), batch, g_cpu.data());
    opt_cpu->Apply(p_cpu.data(), g_cpu.data());
    ASSERT_OK(mlp.StageBatch(b.x.data(), b.y.data(), batch));
    ASSERT_OK(mlp.ForwardBackward(batch));
    ASSERT_OK(opt_gpu->Apply(mlp.params(), mlp.grad(), mlp.compute_stream()));
    absl::StatusOr<float> loss = mlp.TakeLoss();
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_NEAR(*loss, want_loss, 1e-4 * std::fabs(want_loss)) << "step " << step;
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
  absl::StatusOr<std::unique_ptr<CudaMlp>> whole = CudaMlp::Create(spec, 0, false, batch);
  absl::StatusOr<std::unique_ptr<CudaMlp>> layered =
      CudaMlp::Create(spec, 0, false, batch);
  ASSERT_TRUE(whole.ok() && layered.ok());
  cudaStream_t side = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  absl::StatusOr<CudaOptimizer> opt_whole =
      CudaOptimizer::Create(o, (*whole)->num_params(), (*whole)->compute_stream());
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
      ASSERT_OK(opt_layered->Apply(lm.params(), lm.grad(), r.begin, r.size, side));
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
  const float want =
      cpu.ForwardBackward(params.data(), b.x.data(), b.y.data(), batch, g.data());
  ASSERT_OK((*gpu)->StageBatch(b.x.data(), b.y.data(), batch));
  ASSERT_OK((*gpu)->ForwardBackward(batch));
  absl::StatusOr<float> loss = (*gpu)->TakeLoss();
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, want, 1e-2 * std::fabs(want));
}

INSTANTIATE_TEST_SUITE_P(Models, CudaMlpTest,
                         ::testing::Values(ModelCase{{784, 256, 128, 10}, 37},
                                           ModelCase{{5, 4, 3}, 37},
                                           ModelCase{{5, 4, 3}, 1},
                                           ModelCase{{64, 32, 16, 10}, 37},
                                           // More rows than one bias-gradient tile.
                                           ModelCase{{20, 16, 10}, 2500}),
                         [](const ::testing::TestParamInfo<ModelCase>& info) {
                           std::string name = "mlp";
                           for (int w : info.param.widths)
                             name += "_" + std::to_string(w);
                           return name + "_batch" + std::to_string(info.param.batch);
                         });

}  // namespace
}  // namespace cuda
}  // namespace gradsync
