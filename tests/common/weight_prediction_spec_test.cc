// JobSpec.weight_prediction: auto resolves to on for ring async training on
// the CPU and to off elsewhere; an explicit "on" where it cannot apply is
// refused naming the field; the text names parse both ways.
#include <string>

#include <gtest/gtest.h>

#include "common/spec/job_spec.h"
#include "tests/common/spec_test_util.h"

namespace gradsync {
namespace {

using spec_testing::ExpectBad;
using spec_testing::Good;

v1::JobSpec With(v1::Strategy strategy, v1::SyncMode mode) {
  v1::JobSpec s = Good();
  s.set_strategy(strategy);
  s.set_mode(mode);
  return s;
}

v1::WeightPrediction Resolved(const v1::JobSpec& s) {
  absl::StatusOr<v1::JobSpec> ok = ValidateJobSpec(s, 1);
  EXPECT_TRUE(ok.ok()) << ok.status();
  return ok.ok() ? ok->weight_prediction() : v1::WEIGHT_PREDICTION_UNSPECIFIED;
}

TEST(WeightPredictionSpec, AutoIsOnForRingAsyncOnTheCpuOnly) {
  EXPECT_EQ(Resolved(With(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_ASYNC)),
            v1::WEIGHT_PREDICTION_ON);
  EXPECT_EQ(Resolved(With(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_SYNC)),
            v1::WEIGHT_PREDICTION_OFF);
  EXPECT_EQ(Resolved(With(v1::STRATEGY_PS, v1::SYNC_MODE_ASYNC)),
            v1::WEIGHT_PREDICTION_OFF);
  EXPECT_EQ(Resolved(With(v1::STRATEGY_PS, v1::SYNC_MODE_SYNC)),
            v1::WEIGHT_PREDICTION_OFF);
  v1::JobSpec cuda = With(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_ASYNC);
  cuda.set_device(v1::DEVICE_CUDA);
  EXPECT_EQ(Resolved(cuda), v1::WEIGHT_PREDICTION_OFF);
  // Validating a validated spec keeps the choice (a resumed or re-formed job).
  v1::JobSpec again = With(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_ASYNC);
  again.set_weight_prediction(Resolved(again));
  EXPECT_EQ(Resolved(again), v1::WEIGHT_PREDICTION_ON);
}

TEST(WeightPredictionSpec, OffIsKeptAndOnIsRefusedWhereItCannotApply) {
  v1::JobSpec off = With(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_ASYNC);
  off.set_weight_prediction(v1::WEIGHT_PREDICTION_OFF);
  EXPECT_EQ(Resolved(off), v1::WEIGHT_PREDICTION_OFF);
  for (auto [strategy, mode] : {std::pair{v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_SYNC},
                                std::pair{v1::STRATEGY_PS, v1::SYNC_MODE_ASYNC},
                                std::pair{v1::STRATEGY_PS, v1::SYNC_MODE_SYNC}}) {
    v1::JobSpec s = With(strategy, mode);
    s.set_weight_prediction(v1::WEIGHT_PREDICTION_ON);
    ExpectBad(s, "weight_prediction");
  }
  v1::JobSpec cuda = With(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_ASYNC);
  cuda.set_device(v1::DEVICE_CUDA);
  cuda.set_weight_prediction(v1::WEIGHT_PREDICTION_ON);
  ExpectBad(cuda, "weight_prediction");
  v1::JobSpec unknown = Good();
  unknown.set_weight_prediction(static_cast<v1::WeightPrediction>(9));
  ExpectBad(unknown, "weight_prediction");
}

TEST(WeightPredictionSpec, NamesParseBothWays) {
  EXPECT_EQ(*ParseWeightPrediction("auto"), v1::WEIGHT_PREDICTION_UNSPECIFIED);
  EXPECT_EQ(*ParseWeightPrediction("on"), v1::WEIGHT_PREDICTION_ON);
  EXPECT_EQ(*ParseWeightPrediction("off"), v1::WEIGHT_PREDICTION_OFF);
  absl::StatusOr<v1::WeightPrediction> bad = ParseWeightPrediction("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(std::string(bad.status().message()).rfind("weight_prediction:", 0), 0u)
      << bad.status().message();
  EXPECT_EQ(WeightPredictionName(v1::WEIGHT_PREDICTION_ON), "on");
  EXPECT_EQ(WeightPredictionName(v1::WEIGHT_PREDICTION_OFF), "off");
}

}  // namespace
}  // namespace gradsync
