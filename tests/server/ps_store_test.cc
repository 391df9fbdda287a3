// Parameter-server shard aggregation against a simple reference.
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/optimizer.h"
#include "server/ps/ps_store.h"

namespace gradsync {
namespace {

ShardJobConfig Config(int world, bool async, int staleness = -1) {
  ShardJobConfig c;
  c.world_size = world;
  c.async = async;
  c.staleness = staleness;
  c.optimizer.kind = OptimizerKind::kSgd;
  c.optimizer.lr = 0.1f;
  c.optimizer.momentum = 0.9f;
  return c;
}

std::vector<float> Grad(int rank, int step, size_t n) {
  std::mt19937 rng(rank * 7919 + step * 31 + 1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> g(n);
  for (float& x : g) x = u(rng);
  return g;
}

struct Captured {
  bool called = false;
  absl::StatusOr<PsReply> result = absl::UnknownError("not called");
};

Reply Capture(Captured* c) {
  return [c](absl::StatusOr<PsReply> r) {
    c->called = true;
    c->result = std::move(r);
  };
}

void PushVec(PsStore* store, const std::string& job, int64_t step, int rank,
             const std::vector<float>& g, Captured* c) {
  store->Push(job, step, rank, g.size(),
              [&g](float* dst) {
                for (size_t i = 0; i < g.size(); ++i) dst[i] += g[i];
              },
              Capture(c));
}

class PsSyncTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(PsSyncTest, AveragesNPushesAppliesOnceAndAnswersAll) {
  const auto [world, n] = GetParam();
  PsStore store;
  std::vector<float> init(n);
  for (size_t i = 0; i < n; ++i) init[i] = 0.001f * static_cast<float>(i % 100);
  ASSERT_TRUE(store.Init("j", Config(world, false), init).ok());
  // Reference: the same optimizer on the mean gradient.
  std::vector<float> want = init;
  auto ref = Optimizer::Create(Config(world, false).optimizer, n);
  ASSERT_TRUE(ref.ok());
  for (int step = 0; step < 2; ++step) {  // twice on the same object
    std::vector<double> mean(n, 0.0);
    std::vector<Captured> caps(world);
    for (int r = world - 1; r >= 0; --r) {  // arrival order differs from rank
      std::vector<float> g = Grad(r, step, n);
      for (size_t i = 0; i < n; ++i) mean[i] += g[i];
      PushVec(&store, "j", step, r, g, &caps[r]);
      if (r > 0) {
        EXPECT_FALSE(caps[r].called) << "answered before all pushes";
      }
    }
    std::vector<float> meanf(n);
    for (size_t i = 0; i < n; ++i) meanf[i] = static_cast<float>(mean[i] / world);
    ref->Apply(want.data(), meanf.data());
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(caps[r].called);
      ASSERT_TRUE(caps[r].result.ok()) << caps[r].result.status();
      const std::vector<float>& got = *caps[r].result->params;
      ASSERT_EQ(got.size(), n);
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << i;
      EXPECT_EQ(caps[r].result->step, step + 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldsAndSizes, PsSyncTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::Values(size_t{1}, size_t{7},
                                                              size_t{1001})));

TEST(PsStore, WrongSizeWrongStepAndDuplicateAreRejectedNotSummed) {
  PsStore store;
  ASSERT_TRUE(store.Init("j", Config(2, false), std::vector<float>(10, 0)).ok());
  Captured wrong_size, wrong_step, first, dup, second;
  PushVec(&store, "j", 0, 0, std::vector<float>(9, 1), &wrong_size);
  EXPECT_EQ(wrong_size.result.status().code(), absl::StatusCode::kInvalidArgument);
  PushVec(&store, "j", 3, 0, std::vector<float>(10, 1), &wrong_step);
  EXPECT_EQ(wrong_step.result.status().code(),
            absl::StatusCode::kFailedPrecondition);
  PushVec(&store, "j", 0, 0, std::vector<float>(10, 1), &first);
  PushVec(&store, "j", 0, 0, std::vector<float>(10, 100), &dup);
  EXPECT_EQ(dup.result.status().code(), absl::StatusCode::kFailedPrecondition);
  PushVec(&store, "j", 0, 1, std::vector<float>(10, 3), &second);
  ASSERT_TRUE(second.result.ok());
  // mean of 1 and 3 = 2; sgd momentum first step: p = -lr*2 = -0.2
  EXPECT_NEAR((*second.result->params)[0], -0.2f, 1e-6);
  Captured unknown;
  PushVec(&store, "nope", 0, 0, std::vector<float>(10, 1), &unknown);
  EXPECT_EQ(unknown.result.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PsStore, PullWaitsForInitAndEndJobAbortsWaiters) {
  PsStore store;
  Captured early;
  store.Pull("j", true, Capture(&early));
  EXPECT_FALSE(early.called);
  ASSERT_TRUE(store.Init("j", Config(2, false), std::vector<float>(4, 5)).ok());
  ASSERT_TRUE(early.called);
  ASSERT_TRUE(early.result.ok());
  EXPECT_EQ((*early.result->params)[3], 5.0f);
  Captured waiting;
  PushVec(&store, "j", 0, 0, std::vector<float>(4, 1), &waiting);
  EXPECT_FALSE(waiting.called);
  store.EndJob("j", "rank 1 died");
  ASSERT_TRUE(waiting.called);
  EXPECT_EQ(waiting.result.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(waiting.result.status().message(), "rank 1 died");
  Captured late;
  store.Pull("j", false, Capture(&late));
  EXPECT_EQ(late.result.status().code(), absl::StatusCode::kAborted);
}

TEST(PsStore, AsyncAppliesEachPushAtOnce) {
  PsStore store;
  ShardJobConfig c = Config(2, true);
  c.optimizer.momentum = 0;
  ASSERT_TRUE(store.Init("j", c, std::vector<float>(3, 0)).ok());
  Captured a, b;
  PushVec(&store, "j", 0, 0, std::vector<float>(3, 2), &a);
  ASSERT_TRUE(a.called);  // unbounded staleness: no waiting
  EXPECT_NEAR((*a.result->params)[0], -0.1f, 1e-6);  // -(lr/2) * 2
  PushVec(&store, "j", 1, 0, std::vector<float>(3, 2), &b);
  ASSERT_TRUE(b.called);
  EXPECT_NEAR((*b.result->params)[0], -0.2f, 1e-6);
  Captured bad;
  PushVec(&store, "j", 0, 0, std::vector<float>(3, 2), &bad);  // step repeated
  EXPECT_EQ(bad.result.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PsStore, AsyncAdamPushMovesOneNthOfASyncStep) {
  PsStore store;
  ShardJobConfig c = Config(4, true);
  c.optimizer.kind = OptimizerKind::kAdam;
  ASSERT_TRUE(store.Init("j", c, std::vector<float>(2, 0)).ok());
  Captured a;
  PushVec(&store, "j", 0, 0, std::vector<float>(2, 3), &a);
  ASSERT_TRUE(a.result.ok());
  // Adam's first step is lr * sign(g) whatever the gradient's scale; with
  // 4 workers a push must move lr/4.
  EXPECT_NEAR((*a.result->params)[0], -0.1f / 4, 1e-6);
}

TEST(PsStore, SspHoldsTheFastWorkerUntilTheSlowOneCatchesUp) {
  PsStore store;
  ASSERT_TRUE(store.Init("j", Config(2, true, /*staleness=*/1),
                         std::vector<float>(3, 0)).ok());
  Captured s0, s1, slow0;
  PushVec(&store, "j", 0, 0, std::vector<float>(3, 1), &s0);
  EXPECT_TRUE(s0.called);  // rank 0 at step 1, slowest at 0: 1 ahead, allowed
  PushVec(&store, "j", 1, 0, std::vector<float>(3, 1), &s1);
  EXPECT_FALSE(s1.called);  // would be 2 ahead: held
  PushVec(&store, "j", 0, 1, std::vector<float>(3, 1), &slow0);
  EXPECT_TRUE(slow0.called);
  EXPECT_TRUE(s1.called);  // released once rank 1 advanced
  ASSERT_TRUE(s1.result.ok());
}

}  // namespace
}  // namespace gradsync
