// DeviceModel optimizer-state export/import (ring checkpoints): a CPU model
// that takes another's parameters and optimizer state continues exactly as
// the original does, for plain SGD, SGD with momentum and Adam.
#include <vector>

#include <gtest/gtest.h>

#include "tests/model/model_test_util.h"
#include "worker/model/device_model.h"

namespace gradsync {
namespace {

using model_testing::Params;
using model_testing::Step;

const MlpSpec kSpec{{6, 5, 4, 3}};

std::unique_ptr<DeviceModel> Configured(const OptimizerOptions& o) {
  absl::StatusOr<std::unique_ptr<DeviceModel>> m = MakeCpuModel(kSpec);
  EXPECT_TRUE(m.ok()) << m.status();
  // Small buckets: the state is gathered from and spread over several.
  EXPECT_TRUE((*m)->Configure(model_testing::TestBuckets(**m), o, 1).ok());
  std::vector<float> p((*m)->num_params());
  Mlp(kSpec).InitParams(7, p.data());
  EXPECT_TRUE((*m)->SetParams(p.data()).ok());
  return *std::move(m);
}

class OptimizerStateTest : public ::testing::TestWithParam<OptimizerOptions> {};

TEST_P(OptimizerStateTest, ImportedStateContinuesBitIdentically) {
  std::unique_ptr<DeviceModel> a = Configured(GetParam());
  for (uint32_t s = 1; s <= 3; ++s) Step(a.get(), s);
  OptimizerState state;
  ASSERT_TRUE(a->GetOptimizerState(&state).ok());
  EXPECT_EQ(state.steps, 3);
  const size_t n = a->num_params();
  const bool adam = GetParam().kind == OptimizerKind::kAdam;
  const bool momentum = adam || GetParam().momentum != 0.0f;
  EXPECT_EQ(state.first.size(), momentum ? n : 0u);
  EXPECT_EQ(state.second.size(), adam ? n : 0u);

  std::unique_ptr<DeviceModel> b = Configured(GetParam());
  const std::vector<float> p = Params(a.get());
  ASSERT_TRUE(b->SetParams(p.data()).ok());
  ASSERT_TRUE(b->SetOptimizerState(state).ok());
  OptimizerState back;
  ASSERT_TRUE(b->GetOptimizerState(&back).ok());
  EXPECT_EQ(back.steps, state.steps);
  EXPECT_EQ(back.first, state.first);
  EXPECT_EQ(back.second, state.second);
  for (uint32_t s = 4; s <= 5; ++s) {
    Step(a.get(), s);
    Step(b.get(), s);
  }
  EXPECT_EQ(Params(a.get()), Params(b.get()));  // bit-identical
}

TEST_P(OptimizerStateTest, RefusesStateOfAnotherSizeAndBeforeConfigure) {
  std::unique_ptr<DeviceModel> a = Configured(GetParam());
  OptimizerState state;
  ASSERT_TRUE(a->GetOptimizerState(&state).ok());
  OptimizerState bad = state;
  bad.first.assign(a->num_params() + 1, 0.0f);
  EXPECT_TRUE(absl::IsInvalidArgument(a->SetOptimizerState(bad)));
  bad = state;
  bad.steps = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(a->SetOptimizerState(bad)));
  auto fresh = MakeCpuModel(kSpec);
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition((*fresh)->GetOptimizerState(&state)));
  EXPECT_TRUE(absl::IsFailedPrecondition((*fresh)->SetOptimizerState(state)));
}

OptimizerOptions Sgd(float momentum) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.momentum = momentum;
  return o;
}
OptimizerOptions Adam() {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.lr = 0.01f;
  return o;
}

INSTANTIATE_TEST_SUITE_P(Optimizers, OptimizerStateTest,
                         ::testing::Values(Sgd(0.0f), Sgd(0.9f), Adam()));

}  // namespace
}  // namespace gradsync
