#include "common/optimizer.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace gradsync {
namespace {

TEST(OptimizerTest, SgdMomentumMatchesHandComputedSteps) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.lr = 0.1f;
  o.momentum = 0.5f;
  absl::StatusOr<Optimizer> opt = Optimizer::Create(o, 2);
  ASSERT_TRUE(opt.ok()) << opt.status();
  std::vector<float> p = {1.0f, -2.0f};
  const float g[3][2] = {{1.0f, 2.0f}, {0.5f, -1.0f}, {-1.0f, 0.0f}};
  // Hand-computed, v = 0.5 v + g; p -= 0.1 v:
  //   step1: v = (1, 2)        p = (0.9, -2.2)
  //   step2: v = (1.0, 0.0)    p = (0.8, -2.2)
  //   step3: v = (-0.5, 0.0)   p = (0.85, -2.2)
  const float want[3][2] = {{0.9f, -2.2f}, {0.8f, -2.2f}, {0.85f, -2.2f}};
  for (int s = 0; s < 3; ++s) {
    opt->Apply(p.data(), g[s]);
    EXPECT_NEAR(p[0], want[s][0], 1e-6) << "step " << s;
    EXPECT_NEAR(p[1], want[s][1], 1e-6) << "step " << s;
  }
  EXPECT_EQ(opt->steps(), 3);
  EXPECT_EQ(opt->size(), 2u);
}

TEST(OptimizerTest, PlainSgdWithZeroMomentum) {
  OptimizerOptions o;
  o.lr = 0.5f;
  o.momentum = 0.0f;
  absl::StatusOr<Optimizer> opt = Optimizer::Create(o, 1);
  ASSERT_TRUE(opt.ok());
  float p = 1.0f;
  const float g = 1.0f;
  opt->Apply(&p, &g);
  opt->Apply(&p, &g);
  EXPECT_FLOAT_EQ(p, 0.0f);
}

TEST(OptimizerTest, AdamMatchesReferenceLoop) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.lr = 0.01f;
  o.beta1 = 0.8f;
  o.beta2 = 0.99f;
  o.eps = 1e-6f;
  const size_t n = 5;
  absl::StatusOr<Optimizer> opt = Optimizer::Create(o, n);
  ASSERT_TRUE(opt.ok()) << opt.status();
  std::vector<float> p = {0.5f, -1.0f, 2.0f, 0.0f, 3.0f};
  std::vector<double> rp(p.begin(), p.end()), m(n, 0.0), v(n, 0.0);
  for (int t = 1; t <= 10; ++t) {
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) {
      g[i] = std::sin(0.7f * t + static_cast<float>(i)) * (i + 1);
    }
    opt->Apply(p.data(), g.data());
    for (size_t i = 0; i < n; ++i) {
      m[i] = 0.8 * m[i] + 0.2 * g[i];
      v[i] = 0.99 * v[i] + 0.01 * double{g[i]} * g[i];
      const double mhat = m[i] / (1 - std::pow(0.8, t));
      const double vhat = v[i] / (1 - std::pow(0.99, t));
      rp[i] -= 0.01 * mhat / (std::sqrt(vhat) + 1e-6);
    }
    for (size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(p[i], rp[i], 1e-5) << "t=" << t << " i=" << i;
    }
  }
  EXPECT_EQ(opt->steps(), 10);
}

// The vectorized steps (common/optimizer.cc) give the bits of the plain
// float loop, at sizes that leave every vector tail, for both optimizers
// with state. A reciprocal-square-root approximation, an FMA contraction or
// a reordered sum would change the bits.
TEST(OptimizerTest, VectorizedStepsGiveThePlainLoopsBits) {
  for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{33}, size_t{1027}}) {
    for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
      OptimizerOptions o;
      o.kind = kind;
      o.lr = 0.01f;
      o.momentum = 0.7f;
      o.beta1 = 0.85f;
      o.beta2 = 0.995f;
      o.eps = 1e-7f;
      absl::StatusOr<Optimizer> opt = Optimizer::Create(o, n);
      ASSERT_TRUE(opt.ok()) << opt.status();
      std::vector<float> p(n), rp(n), m(n, 0.0f), v(n, 0.0f), g(n);
      for (size_t i = 0; i < n; ++i) p[i] = rp[i] = 0.25f * std::cos(1.0f * i);
      for (int t = 1; t <= 4; ++t) {
        for (size_t i = 0; i < n; ++i) {
          g[i] = std::sin(0.3f * t + 0.11f * i) * (1.0f + (i % 5));
        }
        opt->Apply(p.data(), g.data());
        const float c1 =
            static_cast<float>(1.0 / (1.0 - std::pow(o.beta1, double{1.0} * t)));
        const float c2 =
            static_cast<float>(1.0 / (1.0 - std::pow(o.beta2, double{1.0} * t)));
        for (size_t i = 0; i < n; ++i) {
          if (kind == OptimizerKind::kSgd) {
            m[i] = o.momentum * m[i] + g[i];
            rp[i] -= o.lr * m[i];
          } else {
            m[i] = o.beta1 * m[i] + (1.0f - o.beta1) * g[i];
            v[i] = o.beta2 * v[i] + (1.0f - o.beta2) * g[i] * g[i];
            const float mhat = m[i] * c1;
            const float vhat = v[i] * c2;
            rp[i] -= o.lr * mhat / (std::sqrt(vhat) + o.eps);
          }
        }
        ASSERT_EQ(0, std::memcmp(p.data(), rp.data(), n * sizeof(float)))
            << (kind == OptimizerKind::kSgd ? "sgd" : "adam") << " n=" << n << " step "
            << t;
      }
    }
  }
}

TEST(OptimizerTest, CreateRejectsBadOptions) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto expect_invalid = [](const OptimizerOptions& o, const char* what) {
    absl::StatusOr<Optimizer> opt = Optimizer::Create(o, 4);
    EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument) << what;
  };
  OptimizerOptions o;
  o.kind = static_cast<OptimizerKind>(99);
  expect_invalid(o, "kind");
  o = {};
  o.lr = 0;
  expect_invalid(o, "lr 0");
  o.lr = -1;
  expect_invalid(o, "lr < 0");
  o.lr = nan;
  expect_invalid(o, "lr nan");
  o.lr = inf;
  expect_invalid(o, "lr inf");
  o = {};
  o.momentum = 1.0f;
  expect_invalid(o, "momentum 1");
  o.momentum = -0.1f;
  expect_invalid(o, "momentum < 0");
  o = {};
  o.kind = OptimizerKind::kAdam;
  o.beta1 = 1.0f;
  expect_invalid(o, "beta1 1");
  o.beta1 = 0.9f;
  o.beta2 = -0.5f;
  expect_invalid(o, "beta2 < 0");
  o.beta2 = nan;
  expect_invalid(o, "beta2 nan");

  o = {};
  EXPECT_TRUE(Optimizer::Create(o, 4).ok());
  o.kind = OptimizerKind::kAdam;
  EXPECT_TRUE(Optimizer::Create(o, 4).ok());
}

}  // namespace
}  // namespace gradsync
