// DeviceModel::PredictParams / RestoreParams on the CPU model (ring async's
// weight prediction): the predicted parameters are w + s * (w - w of the
// previous prediction), the restore gives w back bit for bit, SetParams
// forgets the previous w, and misuse is an error rather than a silent drift.
#include <vector>

#include <gtest/gtest.h>

#include "tests/model/model_test_util.h"
#include "worker/model/device_model.h"

namespace gradsync {
namespace {

using model_testing::Params;
using model_testing::Step;
using model_testing::TestBuckets;

const MlpSpec kPredictionSpec{{6, 5, 4, 3}};

std::unique_ptr<DeviceModel> Configured() {
  absl::StatusOr<std::unique_ptr<DeviceModel>> m = MakeCpuModel(kPredictionSpec);
  EXPECT_TRUE(m.ok()) << m.status();
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.lr = 0.1f;
  o.momentum = 0.0f;
  EXPECT_TRUE((*m)->Configure(TestBuckets(**m), o, 3).ok());
  std::vector<float> p((*m)->num_params());
  Mlp(kPredictionSpec).InitParams(7, p.data());
  EXPECT_TRUE((*m)->SetParams(p.data()).ok());
  return *std::move(m);
}

TEST(WeightPredictionTest, ExtrapolatesTheLastUpdateAndRestoresExactly) {
  std::unique_ptr<DeviceModel> m = Configured();
  const std::vector<float> w0 = Params(m.get());
  // First prediction: nothing applied yet, so the parameters stay.
  ASSERT_TRUE(m->PredictParams(2.0f).ok());
  EXPECT_EQ(Params(m.get()), w0);
  ASSERT_TRUE(m->RestoreParams().ok());
  Step(m.get(), 1);
  const std::vector<float> w1 = Params(m.get());
  ASSERT_NE(w1, w0);
  ASSERT_TRUE(m->PredictParams(2.0f).ok());
  const std::vector<float> predicted = Params(m.get());
  for (size_t i = 0; i < w1.size(); ++i) {
    EXPECT_EQ(predicted[i], w1[i] + 2.0f * (w1[i] - w0[i])) << i;
  }
  ASSERT_TRUE(m->RestoreParams().ok());
  EXPECT_EQ(Params(m.get()), w1);  // bit for bit
  // The next prediction extrapolates the update since this one.
  Step(m.get(), 2);
  const std::vector<float> w2 = Params(m.get());
  ASSERT_TRUE(m->PredictParams(1.0f).ok());
  const std::vector<float> again = Params(m.get());
  for (size_t i = 0; i < w2.size(); ++i)
    EXPECT_EQ(again[i], w2[i] + (w2[i] - w1[i])) << i;
  ASSERT_TRUE(m->RestoreParams().ok());
}

TEST(WeightPredictionTest, TheGradientIsTakenAtThePredictedParameters) {
  // Two models at the same w after one step: one computes on its predicted
  // parameters, the other has them set plainly; their gradients agree, and
  // differ from the gradient at w.
  std::unique_ptr<DeviceModel> a = Configured();
  std::unique_ptr<DeviceModel> b = Configured();
  ASSERT_TRUE(a->PredictParams(1.0f).ok());
  ASSERT_TRUE(a->RestoreParams().ok());
  Step(a.get(), 1);
  const std::vector<float> w = Params(a.get());
  std::vector<float> predicted;
  std::vector<float> x(8 * 6), g_pred(a->num_params()), g_plain(a->num_params()),
      g_at_w(a->num_params());
  std::vector<uint8_t> y(8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5) / 5.0f;
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<uint8_t>(i % 3);
  const std::vector<Range> buckets = TestBuckets(*a);
  auto gradient = [&](DeviceModel* m, std::vector<float>* out) {
    ASSERT_TRUE(m->StageBatch(x.data(), y.data(), 8).ok());
    ASSERT_TRUE(
        m->ForwardBackward(8, [&](int bucket) {
           ASSERT_TRUE(
               m->StartGradCopy(bucket, 0, out->data() + buckets[bucket].begin).ok());
         }).ok());
    ASSERT_TRUE(m->TakeLoss().ok());
  };
  ASSERT_TRUE(a->PredictParams(1.0f).ok());
  predicted = Params(a.get());
  gradient(a.get(), &g_pred);
  ASSERT_TRUE(a->RestoreParams().ok());
  ASSERT_TRUE(b->SetParams(predicted.data()).ok());
  gradient(b.get(), &g_plain);
  EXPECT_EQ(g_pred, g_plain);
  ASSERT_TRUE(b->SetParams(w.data()).ok());
  gradient(b.get(), &g_at_w);
  EXPECT_NE(g_pred, g_at_w);
  EXPECT_EQ(Params(a.get()), w);
}

TEST(WeightPredictionTest, SetParamsForgetsThePreviousParameters) {
  std::unique_ptr<DeviceModel> m = Configured();
  ASSERT_TRUE(m->PredictParams(1.0f).ok());
  ASSERT_TRUE(m->RestoreParams().ok());
  Step(m.get(), 1);
  // A checkpoint's parameters arrive: no update to extrapolate yet.
  std::vector<float> p(m->num_params(), 0.25f);
  ASSERT_TRUE(m->SetParams(p.data()).ok());
  ASSERT_TRUE(m->PredictParams(3.0f).ok());
  EXPECT_EQ(Params(m.get()), p);
  ASSERT_TRUE(m->RestoreParams().ok());
}

TEST(WeightPredictionTest, MisuseIsAnError) {
  std::unique_ptr<DeviceModel> m = Configured();
  EXPECT_EQ(m->RestoreParams().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(m->PredictParams(1.0f).ok());
  EXPECT_EQ(m->PredictParams(1.0f).code(), absl::StatusCode::kFailedPrecondition);
  // Setting parameters over predicted ones would leave nothing to restore.
  std::vector<float> p(m->num_params(), 0.5f);
  EXPECT_EQ(m->SetParams(p.data()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m->SetParamsRange(Range{0, 4}, p.data()).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(m->RestoreParams().ok());
  EXPECT_TRUE(m->SetParams(p.data()).ok());
}

}  // namespace
}  // namespace gradsync
