#include "worker/model/mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "common/optimizer.h"
#include "gtest/gtest.h"

namespace gradsync {
namespace {

MlpSpec Spec(std::vector<int> widths) {
  MlpSpec s;
  s.widths = std::move(widths);
  return s;
}

std::vector<float> RandomVec(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Naive double-precision reference: logits of one sample, using the flat
// layout documented in mlp.h (W_l [out][in] row-major, then b_l).
std::vector<double> RefLogits(const MlpSpec& spec, const std::vector<double>& params,
                              const float* x) {
  std::vector<double> a(x, x + spec.widths[0]);
  size_t off = 0;
  const size_t layers = spec.widths.size() - 1;
  for (size_t l = 0; l < layers; ++l) {
    const int in = spec.widths[l], out = spec.widths[l + 1];
    const double* w = params.data() + off;
    const double* b = w + static_cast<size_t>(out) * in;
    std::vector<double> z(out);
    for (int o = 0; o < out; ++o) {
      double s = b[o];
      for (int i = 0; i < in; ++i) s += w[static_cast<size_t>(o) * in + i] * a[i];
      z[o] = (l + 1 < layers) ? std::max(s, 0.0) : s;
    }
    a = std::move(z);
    off += static_cast<size_t>(out) * in + out;
  }
  return a;
}

double RefSampleLoss(const std::vector<double>& z, int label) {
  const double m = *std::max_element(z.begin(), z.end());
  double s = 0;
  for (double v : z) s += std::exp(v - m);
  return std::log(s) + m - z[label];
}

double RefMeanLoss(const MlpSpec& spec, const std::vector<double>& params, const float* x,
                   const uint8_t* y, int batch) {
  double total = 0;
  for (int r = 0; r < batch; ++r) {
    total += RefSampleLoss(
        RefLogits(spec, params, x + static_cast<size_t>(r) * spec.widths[0]), y[r]);
  }
  return total / batch;
}

TEST(ParseModelSpecTest, AcceptsGoodSpecs) {
  absl::StatusOr<MlpSpec> s = ParseModelSpec("mlp:784-256-128-10");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->widths, (std::vector<int>{784, 256, 128, 10}));
  EXPECT_EQ(s->ToString(), "mlp:784-256-128-10");
  s = ParseModelSpec("mlp:1-1");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->widths, (std::vector<int>{1, 1}));
  s = ParseModelSpec("mlp:1048576-2");
  ASSERT_TRUE(s.ok()) << s.status();
}

TEST(ParseModelSpecTest, RejectsBadSpecs) {
  for (const char* bad : {"", "mlp:", "mlp:784", "cnn:784-10", "MLP:784-10", "784-10",
                          "mlp:784--10", "mlp:784-0-10", "mlp:784-x-10", "mlp:+784-10",
                          "mlp:-784-10", "mlp: 784-10", "mlp:784-10-", "mlp:784-10 ",
                          "mlp:1048577-10", "mlp:99999999999-10", "mlp:7.5-10"}) {
    absl::StatusOr<MlpSpec> s = ParseModelSpec(bad);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
        << "\"" << bad << "\"";
    EXPECT_NE(s.status().message().find("model"), std::string::npos) << s.status();
  }
}

TEST(MlpTest, NumParamsAndLayout) {
  const MlpSpec spec = Spec({784, 256, 128, 10});
  const size_t want = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10;
  EXPECT_EQ(NumParams(spec), want);
  EXPECT_EQ(NumParams(Spec({5, 4, 3})), 5u * 4 + 4 + 4 * 3 + 3);
  Mlp mlp(spec);
  EXPECT_EQ(mlp.num_params(), want);
  EXPECT_EQ(mlp.num_layers(), 3);
  size_t next = 0;
  for (int l = 0; l < 3; ++l) {
    const Range r = mlp.LayerRange(l);
    EXPECT_EQ(r.begin, next);
    EXPECT_EQ(r.size, static_cast<size_t>(spec.widths[l + 1]) * (spec.widths[l] + 1));
    next = r.end();
  }
  EXPECT_EQ(next, want);
}

TEST(MlpTest, InitParamsIsDeterministicHeUniformWithZeroBiases) {
  const MlpSpec spec = Spec({20, 16, 4});
  Mlp mlp(spec);
  std::vector<float> a(mlp.num_params(), 7.0f), b(mlp.num_params()), c(mlp.num_params());
  mlp.InitParams(42, a.data());
  mlp.InitParams(42, b.data());
  mlp.InitParams(43, c.data());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  EXPECT_NE(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float)));
  size_t off = 0;
  for (int l = 0; l < 2; ++l) {
    const int in = spec.widths[l], out = spec.widths[l + 1];
    const float limit = std::sqrt(6.0f / in);
    double sum_sq = 0;
    for (int i = 0; i < in * out; ++i) {
      const float w = a[off + i];
      EXPECT_LE(std::fabs(w), limit);
      sum_sq += double{w} * w;
    }
    // Var of U(-a, a) is a^2/3; loose check that the scale is right.
    EXPECT_NEAR(sum_sq / (in * out), limit * limit / 3, limit * limit / 6);
    for (int j = 0; j < out; ++j) EXPECT_EQ(a[off + in * out + j], 0.0f);
    off += static_cast<size_t>(in) * out + out;
  }
}

TEST(MlpTest, GradientMatchesFiniteDifferences) {
  const MlpSpec spec = Spec({5, 4, 3});
  Mlp mlp(spec);
  const int batch = 3;
  std::vector<float> params = RandomVec(mlp.num_params(), 11, -0.8f, 0.8f);
  const std::vector<float> x = RandomVec(batch * 5, 12, -1.0f, 1.0f);
  const std::vector<uint8_t> y = {0, 2, 1};
  std::vector<float> grad(mlp.num_params(), 123.0f);
  const float loss =
      mlp.ForwardBackward(params.data(), x.data(), y.data(), batch, grad.data());

  std::vector<double> p(params.begin(), params.end());
  EXPECT_NEAR(loss, RefMeanLoss(spec, p, x.data(), y.data(), batch), 1e-5);

  const double h = 1e-5;
  for (size_t i = 0; i < p.size(); ++i) {
    std::vector<double> plus = p, minus = p;
    plus[i] += h;
    minus[i] -= h;
    const double fd = (RefMeanLoss(spec, plus, x.data(), y.data(), batch) -
                       RefMeanLoss(spec, minus, x.data(), y.data(), batch)) /
                      (2 * h);
    const double err =
        std::fabs(fd - grad[i]) / std::max(1e-3, std::fabs(fd) + std::fabs(grad[i]));
    EXPECT_LT(err, 1e-2) << "param " << i << " analytic " << grad[i] << " numeric " << fd;
  }
}

TEST(MlpTest, GradientCheckDeeperNetWithBiases) {
  // Three layers exercise backprop through two ReLUs; non-zero biases make
  // the bias gradients meaningful.
  const MlpSpec spec = Spec({6, 5, 4, 3});
  Mlp mlp(spec);
  const int batch = 4;
  std::vector<float> params = RandomVec(mlp.num_params(), 21, -0.7f, 0.7f);
  const std::vector<float> x = RandomVec(batch * 6, 22, -1.0f, 1.0f);
  const std::vector<uint8_t> y = {2, 0, 1, 2};
  std::vector<float> grad(mlp.num_params());
  mlp.ForwardBackward(params.data(), x.data(), y.data(), batch, grad.data());
  std::vector<double> p(params.begin(), params.end());
  const double h = 1e-5;
  for (size_t i = 0; i < p.size(); ++i) {
    std::vector<double> plus = p, minus = p;
    plus[i] += h;
    minus[i] -= h;
    const double fd = (RefMeanLoss(spec, plus, x.data(), y.data(), batch) -
                       RefMeanLoss(spec, minus, x.data(), y.data(), batch)) /
                      (2 * h);
    const double err =
        std::fabs(fd - grad[i]) / std::max(1e-3, std::fabs(fd) + std::fabs(grad[i]));
    EXPECT_LT(err, 1e-2) << "param " << i;
  }
}

TEST(MlpTest, ForwardBackwardIsDeterministic) {
  Mlp mlp(Spec({784, 256, 128, 10}));
  std::vector<float> params(mlp.num_params());
  mlp.InitParams(1, params.data());
  const int batch = 64;
  const std::vector<float> x = RandomVec(batch * 784, 2, 0.0f, 1.0f);
  std::vector<uint8_t> y(batch);
  for (int i = 0; i < batch; ++i) y[i] = static_cast<uint8_t>(i % 10);
  std::vector<float> g1(mlp.num_params()), g2(mlp.num_params());
  const float l1 =
      mlp.ForwardBackward(params.data(), x.data(), y.data(), batch, g1.data());
  Mlp other(Spec({784, 256, 128, 10}));
  const float l2 =
      other.ForwardBackward(params.data(), x.data(), y.data(), batch, g2.data());
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(0, std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(float)));
}

TEST(MlpTest, InitialLossIsAboutLogTen) {
  Mlp mlp(Spec({784, 256, 128, 10}));
  std::vector<float> params(mlp.num_params());
  mlp.InitParams(7, params.data());
  const int batch = 32;
  const std::vector<float> x = RandomVec(batch * 784, 8, 0.0f, 0.05f);
  std::vector<uint8_t> y(batch);
  for (int i = 0; i < batch; ++i) y[i] = static_cast<uint8_t>((i * 7) % 10);
  std::vector<float> grad(mlp.num_params());
  const float loss =
      mlp.ForwardBackward(params.data(), x.data(), y.data(), batch, grad.data());
  EXPECT_NEAR(loss, std::log(10.0), 0.1);
}

TEST(MlpTest, SgdStepsReduceLossOnSeparableProblem) {
  // Three classes in 4-D, labelled by the argmax of a fixed linear map.
  const int n = 96, in = 4;
  std::vector<float> x = RandomVec(n * in, 31, -1.0f, 1.0f);
  std::vector<uint8_t> y(n);
  for (int r = 0; r < n; ++r) {
    const float* v = x.data() + r * in;
    const float s[3] = {v[0] + v[1], v[2] - v[0], v[3] - v[1]};
    y[r] = static_cast<uint8_t>(std::max_element(s, s + 3) - s);
  }
  Mlp mlp(Spec({in, 16, 3}));
  std::vector<float> params(mlp.num_params()), grad(mlp.num_params());
  mlp.InitParams(3, params.data());
  OptimizerOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  absl::StatusOr<Optimizer> opt = Optimizer::Create(o, mlp.num_params());
  ASSERT_TRUE(opt.ok());
  const float first =
      mlp.ForwardBackward(params.data(), x.data(), y.data(), n, grad.data());
  float last = first;
  for (int step = 0; step < 60; ++step) {
    opt->Apply(params.data(), grad.data());
    last = mlp.ForwardBackward(params.data(), x.data(), y.data(), n, grad.data());
  }
  EXPECT_LT(last, 0.5f * first) << "first " << first << " last " << last;
  const EvalResult eval = mlp.Evaluate(params.data(), x.data(), y.data(), n);
  EXPECT_GT(eval.accuracy(), 0.8);
}

TEST(MlpTest, EvaluateMatchesNaiveArgmaxAcrossBlocks) {
  // 2500 rows spans several evaluation blocks including a partial one.
  const MlpSpec spec = Spec({6, 5, 4});
  Mlp mlp(spec);
  const int64_t n = 2500;
  std::vector<float> params(mlp.num_params());
  mlp.InitParams(5, params.data());
  const std::vector<float> x = RandomVec(n * 6, 6, -1.0f, 1.0f);
  std::vector<uint8_t> y(n);
  std::mt19937_64 rng(9);
  for (auto& label : y) label = static_cast<uint8_t>(rng() % 4);
  const std::vector<double> p(params.begin(), params.end());
  int64_t correct = 0;
  double loss = 0;
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<double> z = RefLogits(spec, p, x.data() + r * 6);
    const int pred = static_cast<int>(std::max_element(z.begin(), z.end()) - z.begin());
    if (pred == y[r]) ++correct;
    loss += RefSampleLoss(z, y[r]);
  }
  const EvalResult eval = mlp.Evaluate(params.data(), x.data(), y.data(), n);
  EXPECT_EQ(eval.n, n);
  EXPECT_EQ(eval.correct, correct);
  EXPECT_NEAR(eval.mean_loss, loss / n, 1e-4);
  EXPECT_DOUBLE_EQ(eval.accuracy(), static_cast<double>(correct) / n);
  // Chance level is 25%: make sure the count is not trivially 0 or n.
  EXPECT_GT(correct, 0);
  EXPECT_LT(correct, n);
}

}  // namespace
}  // namespace gradsync
