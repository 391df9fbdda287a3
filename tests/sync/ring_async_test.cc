// Ring async (bounded staleness) against a serial reference: after Step(t)
// the parameters hold exactly the averaged updates of steps <= t - s.
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/optimizer.h"
#include "worker/sync/gradient_sync.h"
#include "worker/collectives/transport/inproc/inproc_transport.h"

namespace gradsync {
namespace {

float G(int rank, int step, size_t i) {
  return 0.01f * (rank + 1) * (step + 1) + 0.001f * static_cast<float>(i);
}

TEST(RingAsync, AppliesAveragedGradientsExactlySStepsLate) {
  const int world = 3;
  const size_t n = 11;
  const int steps = 8;
  for (int s : {1, 2, 3}) {
    InProcGroup group(world);
    std::vector<v1::Assignment> as(world);
    for (int r = 0; r < world; ++r) {
      as[r].set_job_id("a");
      as[r].set_rank(r);
      as[r].set_world_size(world);
      auto* spec = as[r].mutable_spec();
      spec->set_strategy(v1::STRATEGY_RING);
      spec->set_mode(v1::SYNC_MODE_ASYNC);
      spec->set_staleness(s);
      spec->set_optimizer(v1::OPTIMIZER_SGD);
      spec->set_lr(0.1f);
      spec->set_momentum(0.5f);
      spec->set_chunk_bytes(8);
      spec->set_step_timeout_ms(10000);
    }
    // after[r][t] = params after Step(t) returned on rank r.
    std::vector<std::vector<std::vector<float>>> after(
        world, std::vector<std::vector<float>>(steps));
    std::vector<std::vector<float>> final(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        SyncContext ctx{&as[r], n, group.transport(r)};
        auto sync = MakeGradientSync(ctx);
        ASSERT_TRUE(sync.ok());
        std::vector<float> params(n, 1.0f), grad(n);
        ASSERT_TRUE((*sync)->Initialize(params.data()).ok());
        for (int t = 0; t < steps; ++t) {
          for (size_t i = 0; i < n; ++i) grad[i] = G(r, t, i);
          ASSERT_TRUE((*sync)->Step(t, grad.data(), params.data()).ok());
          after[r][t] = params;
        }
        ASSERT_TRUE((*sync)->Finish(params.data()).ok());
        final[r] = params;
      });
    }
    for (auto& t : threads) t.join();
    // Reference.
    OptimizerOptions o;
    o.kind = OptimizerKind::kSgd;
    o.lr = 0.1f;
    o.momentum = 0.5f;
    auto opt = Optimizer::Create(o, n);
    ASSERT_TRUE(opt.ok());
    std::vector<float> ref(n, 1.0f);
    int applied = 0;
    auto apply_next = [&] {
      std::vector<float> avg(n);
      for (size_t i = 0; i < n; ++i) {
        float sum = 0;
        for (int r = 0; r < world; ++r) sum += G(r, applied, i);
        avg[i] = sum / world;
      }
      opt->Apply(ref.data(), avg.data());
      ++applied;
    };
    for (int t = 0; t < steps; ++t) {
      while (applied <= t - s) apply_next();
      for (int r = 0; r < world; ++r) {
        for (size_t i = 0; i < n; ++i) {
          ASSERT_NEAR(after[r][t][i], ref[i], 1e-5)
              << "s=" << s << " rank " << r << " step " << t << " i " << i;
        }
      }
    }
    while (applied < steps) apply_next();
    for (int r = 0; r < world; ++r) {
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(final[r][i], ref[i], 1e-5);
      EXPECT_EQ(final[r], final[0]);
    }
  }
}

}  // namespace
}  // namespace gradsync
