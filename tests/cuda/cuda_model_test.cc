// Tests of the CUDA DeviceModel (its gradient slots, copies and ordering);
// how results are compared: cuda_test.cc. Each test skips without a GPU.

#include <cstring>
#include <string>
#include <vector>

#include "tests/cuda/cuda_test_util.h"

namespace gradsync {
namespace cuda {
namespace {

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
  absl::StatusOr<std::unique_ptr<DeviceModel>> m = MakeCudaModel(spec, 0, false, 8);
  ASSERT_TRUE(m.ok()) << m.status();
  DeviceModel& model = **m;
  float host[64] = {};
  EXPECT_EQ(model.StartGradCopy(0, 0, host).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(model.ForwardBackward(1, [](int) {}).code(),
            absl::StatusCode::kFailedPrecondition);
  const std::vector<Range> buckets = MakeBuckets(model, 1 << 20);
  OptimizerOptions sgd;
  EXPECT_EQ(model.Configure(buckets, sgd, 0).code(), absl::StatusCode::kInvalidArgument);
  // Not at a layer boundary; not covering everything; wrong order.
  const size_t n = model.num_params();
  EXPECT_EQ(model.Configure({Range{1, n - 1}, Range{0, 1}}, sgd, 2).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.Configure({model.LayerRange(1)}, sgd, 2).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.Configure({model.LayerRange(0), model.LayerRange(1)}, sgd, 2).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK(model.Configure({model.LayerRange(1), model.LayerRange(0)}, sgd, 2));
  EXPECT_EQ(model.StartGradCopy(2, 0, host).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.StartGradCopy(0, 2, host).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.WaitGradCopy(0, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.TakeLoss().status().code(), absl::StatusCode::kFailedPrecondition);
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
    want_loss.push_back(cpu.ForwardBackward(params.data(), batches[t].x.data(),
                                            batches[t].y.data(), kBatch,
                                            want_grad.back().data()));
  }

  absl::StatusOr<std::unique_ptr<DeviceModel>> m = MakeCudaModel(spec, 0, false, kBatch);
  ASSERT_TRUE(m.ok()) << m.status();
  DeviceModel& model = **m;
  const std::vector<Range> buckets = MakeBuckets(model, 1 << 20);
  ASSERT_GE(buckets.size(), 2u);
  OptimizerOptions sgd;
  ASSERT_OK(model.Configure(buckets, sgd, kSlots));
  ASSERT_OK(model.SetParams(params.data()));
  std::vector<std::shared_ptr<float>> slots;
  for (int k = 0; k < kSlots; ++k) {
    absl::StatusOr<std::shared_ptr<float>> s = model.AllocHost(model.num_params());
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
    EXPECT_LE(
        WorstSegmentError(spec, slots[t % kSlots].get(), want_grad[t].data(), &where),
        1e-5)
        << where;
    std::fill(slots[t % kSlots].get(), slots[t % kSlots].get() + model.num_params(),
              std::numeric_limits<float>::quiet_NaN());
  };
  auto take_loss = [&](int t) {
    absl::StatusOr<float> loss = model.TakeLoss();
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_NEAR(*loss, want_loss[t], 1e-5 * std::fabs(want_loss[t])) << "step " << t;
  };

  std::vector<float> x = batches[0].x;
  std::vector<uint8_t> y = batches[0].y;
  ASSERT_OK(model.StageBatch(x.data(), y.data(), kBatch));
  for (int t = 0; t < kSteps; ++t) {
    std::vector<int> ready;
    absl::Status copy_status;
    ASSERT_OK(model.ForwardBackward(kBatch, [&](int b) {
      ready.push_back(b);
      absl::Status st =
          model.StartGradCopy(b, t % kSlots, slots[t % kSlots].get() + buckets[b].begin);
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
      ASSERT_OK(m->ApplyGradient(static_cast<int>(b), g->get() + buckets[b].begin));
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
