// Helpers of the DeviceModel tests (optimizer_state_test.cc,
// weight_prediction_test.cc): a model's parameters, and one optimizer step
// of every bucket with a random gradient.
#ifndef GRADSYNC_TESTS_MODEL_MODEL_TEST_UTIL_H_
#define GRADSYNC_TESTS_MODEL_MODEL_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "worker/model/device_model.h"

namespace gradsync {
namespace model_testing {

// The buckets the tests configure their models with: 64 bytes, several.
inline std::vector<Range> TestBuckets(const DeviceModel& m) { return MakeBuckets(m, 64); }

// One optimizer step of every bucket with a gradient drawn from `seed`.
inline void Step(DeviceModel* m, uint32_t seed) {
  const std::vector<Range> buckets = TestBuckets(*m);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> g(m->num_params());
  for (float& x : g) x = u(rng);
  for (size_t b = 0; b < buckets.size(); ++b) {
    ASSERT_TRUE(m->ApplyGradient(static_cast<int>(b), g.data() + buckets[b].begin).ok());
  }
}

inline std::vector<float> Params(DeviceModel* m) {
  std::vector<float> p(m->num_params());
  EXPECT_TRUE(m->GetParams(p.data()).ok());
  return p;
}

}  // namespace model_testing
}  // namespace gradsync

#endif  // GRADSYNC_TESTS_MODEL_MODEL_TEST_UTIL_H_
