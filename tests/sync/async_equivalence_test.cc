// The async modes through the real gRPC data path, in one process: ring
// async follows a serial reference of its staleness (plain delayed
// gradients, and with weight prediction), its replicas stay bit-identical,
// and PS async runs to completion.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "tests/sync/sync_equivalence_fixture.h"

namespace gradsync {
namespace sync_testing {
namespace {

class AsyncEquivalence : public SyncEquivalence {
 protected:
  // What ring async with staleness s computes, serially on one thread: step t
  // computes every rank's gradient on parameters w to which the averaged
  // gradients of steps <= t - s - 1 have been applied (SGD as in Run); with
  // `predict`, on w + s * (w - w of step t - 1) instead.
  static std::vector<float> StaleReference(int world, int batch, int steps, int s,
                                           bool predict) {
    const MlpSpec spec = *ParseModelSpec(kDefaultModel);
    Mlp mlp(spec);
    const size_t n = mlp.num_params();
    std::vector<float> params(n), grad(n);
    mlp.InitParams(7, params.data());
    std::vector<float> before = params, at(n);
    OptimizerOptions o;
    o.kind = OptimizerKind::kSgd;
    o.lr = 0.05f;
    o.momentum = 0.9f;
    Optimizer opt = *Optimizer::Create(o, n);
    std::vector<StepPlan> plans;
    for (int r = 0; r < world; ++r) {
      JobOptions a;
      a.rank = r;
      a.world_size = world;
      a.batch_size = batch;
      a.steps = steps;
      a.seed = 7;
      plans.push_back(*StepPlan::Make(a, *train_));
    }
    std::vector<std::vector<float>> avg(steps, std::vector<float>(n, 0.0f));
    int applied = 0;
    for (int t = 0; t < steps; ++t) {
      for (size_t i = 0; i < n; ++i) {
        at[i] = predict ? params[i] + static_cast<float>(s) * (params[i] - before[i])
                        : params[i];
      }
      before = params;
      for (int r = 0; r < world; ++r) {
        plans[r].Gather(t);
        mlp.ForwardBackward(at.data(), plans[r].x(), plans[r].y(), batch, grad.data());
        for (size_t i = 0; i < n; ++i) avg[t][i] += grad[i] / world;
      }
      for (; applied <= t - s; ++applied) opt.Apply(params.data(), avg[applied].data());
    }
    for (; applied < steps; ++applied) opt.Apply(params.data(), avg[applied].data());
    return params;
  }
};

TEST_F(AsyncEquivalence, RingAsyncReplicasStayIdenticalAndAdamWorks) {
  auto four = Run("ring", "async", 3, 16, 21, 1, "adam");
  ASSERT_EQ(four.size(), 3u);
  ASSERT_FALSE(four[0].empty());
  for (size_t r = 1; r < four.size(); ++r) {
    EXPECT_EQ(Checksum(four[r].data(), four[r].size()),
              Checksum(four[0].data(), four[0].size()));
  }
  // It trained: parameters moved away from the sync trajectory's start but
  // stayed finite.
  for (float x : four[0]) ASSERT_TRUE(std::isfinite(x));
}

TEST_F(AsyncEquivalence, PsAsyncRunsToCompletion) {
  auto p = Run("ps", "async", 3, 16, 20, 2);
  ASSERT_EQ(p.size(), 3u);
  for (const auto& v : p) ASSERT_FALSE(v.empty());
}

TEST_F(AsyncEquivalence, RingAsyncFollowsTheSerialStaleReference) {
  // Step u's averaged gradient is applied before step u+s+1 computes.
  weight_prediction_ = v1::WEIGHT_PREDICTION_OFF;
  for (int s : {1, 2, 3}) {
    auto got = Run("ring", "async", 3, 16, 12, 1, "sgd", 0, s);
    ASSERT_EQ(got.size(), 3u);
    ASSERT_FALSE(got[0].empty());
    for (int r = 1; r < 3; ++r) EXPECT_EQ(got[r], got[0]) << "s=" << s;
    const auto want = StaleReference(3, 16, 12, s, false);
    EXPECT_LE(RelativeError(got[0], want), 1e-4) << "s=" << s;
    // The reference can tell staleness levels apart.
    if (s > 1) {
      EXPECT_GT(RelativeError(got[0], StaleReference(3, 16, 12, s - 1, false)), 1e-4)
          << "s=" << s;
    }
  }
}

TEST_F(AsyncEquivalence, RingAsyncWithWeightPredictionFollowsThePredictedReference) {
  // The default for ring async on the CPU: each step's gradient is taken at
  // the parameters extrapolated s last updates ahead.
  for (int s : {1, 2}) {
    auto got = Run("ring", "async", 3, 16, 12, 1, "sgd", 0, s);
    ASSERT_EQ(got.size(), 3u);
    ASSERT_FALSE(got[0].empty());
    for (int r = 1; r < 3; ++r) EXPECT_EQ(got[r], got[0]) << "s=" << s;
    EXPECT_LE(RelativeError(got[0], StaleReference(3, 16, 12, s, true)), 1e-4)
        << "s=" << s;
    // ...and not the plain delayed trajectory: the check can fail.
    EXPECT_GT(RelativeError(got[0], StaleReference(3, 16, 12, s, false)), 1e-4)
        << "s=" << s;
  }
}

TEST_F(AsyncEquivalence, BucketedRingAsyncFollowsTheSameStaleTrajectory) {
  // The bucket layout does not change what is applied when.
  auto plain = Run("ring", "async", 3, 16, 25, 1, "sgd");
  auto bucketed = Run("ring", "async", 3, 16, 25, 1, "sgd", kSmallBuckets);
  ASSERT_EQ(bucketed.size(), 3u);
  ASSERT_FALSE(bucketed[0].empty());
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(Checksum(bucketed[r].data(), bucketed[r].size()),
              Checksum(bucketed[0].data(), bucketed[0].size()));
  }
  EXPECT_LE(RelativeError(bucketed[0], plain[0]), 1e-4);
  // ...and not the sync one: staleness changes the trajectory.
  auto sync = Run("ring", "sync", 3, 16, 25, 1, "sgd");
  EXPECT_GT(RelativeError(bucketed[0], sync[0]), 1e-3);
}

TEST_F(AsyncEquivalence, BucketedPsAsyncRunsToCompletion) {
  auto p = Run("ps", "async", 3, 16, 20, 2, "adam", kSmallBuckets);
  ASSERT_EQ(p.size(), 3u);
  for (const auto& v : p) ASSERT_FALSE(v.empty());
}

}  // namespace
}  // namespace sync_testing
}  // namespace gradsync
