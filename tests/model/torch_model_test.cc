// The TorchScript model (worker/model/torch) against the built-in MLP, its
// bucket announcements during backward, its optimizer state, and its refusals
// of modules that break the contract. The modules are written by
// make_torch_models.py (Debian's python3-torch) when the suite starts.
#include "worker/model/torch/torch_model.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "worker/model/device_model.h"
#include "worker/model/mlp.h"
#include "worker/model/torch/memory_budget.h"
#include "worker/model/torch/tensor_data.h"

namespace gradsync {
namespace {

std::string ModelDir() { return std::string(GRADSYNC_TEST_TMP) + "/torch_models"; }

class TorchModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string cmd = std::string(GRADSYNC_TORCH_PYTHON) + " " +
                            GRADSYNC_SOURCE_DIR + "/tests/model/make_torch_models.py " +
                            ModelDir();
    made_ = std::system(cmd.c_str()) == 0;
  }
  void SetUp() override {
    ASSERT_TRUE(made_) << "make_torch_models.py failed (is python3-torch installed?)";
  }

  static absl::StatusOr<std::unique_ptr<DeviceModel>> Load(const std::string& name,
                                                           int features = 20,
                                                           int classes = 10,
                                                           int64_t max_memory_bytes = 0) {
    TorchModelOptions o;
    o.path = ModelDir() + "/" + name;
    o.features = features;
    o.classes = classes;
    o.max_memory_bytes = max_memory_bytes;
    return MakeTorchScriptModel(o);
  }

  static std::vector<float> RandomX(int batch, int features, uint64_t seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(0, 1);
    std::vector<float> x(static_cast<size_t>(batch) * features);
    for (float& v : x) v = u(gen);
    return x;
  }

  static bool made_;
};
bool TorchModelTest::made_ = false;

// nn.Linear stores [out, in] row-major then the bias: the built-in MLP's
// layout. Same parameters and batch: the same loss and gradient.
TEST_F(TorchModelTest, GradientMatchesTheBuiltInMlp) {
  auto model = Load("mlp.pt");
  ASSERT_TRUE(model.ok()) << model.status();
  DeviceModel& m = **model;
  Mlp ref(MlpSpec{{20, 16, 8, 10}});
  ASSERT_EQ(m.num_params(), ref.num_params());
  ASSERT_EQ(m.num_layers(), 6);  // 3 weights and 3 biases
  const std::vector<Range> buckets = MakeBuckets(m, 1 << 20);
  ASSERT_TRUE(m.Configure(buckets, OptimizerOptions{}, 2).ok());
  std::vector<float> params(m.num_params());
  ref.InitParams(7, params.data());
  ASSERT_TRUE(m.SetParams(params.data()).ok());
  for (int batch : {1, 5, 32}) {
    const std::vector<float> x = RandomX(batch, 20, batch);
    std::vector<uint8_t> y(batch);
    for (int i = 0; i < batch; ++i) y[i] = static_cast<uint8_t>((i * 7) % 10);
    std::vector<float> want(ref.num_params());
    const float want_loss =
        ref.ForwardBackward(params.data(), x.data(), y.data(), batch, want.data());
    ASSERT_TRUE(m.StageBatch(x.data(), y.data(), batch).ok());
    std::vector<float> got(m.num_params());
    ASSERT_TRUE(m.ForwardBackward(batch, [&](int b) {
                   ASSERT_TRUE(m.StartGradCopy(b, 0, got.data() + buckets[b].begin).ok());
                 }).ok());
    auto loss = m.TakeLoss();
    ASSERT_TRUE(loss.ok());
    EXPECT_NEAR(*loss, want_loss, 1e-5) << "batch " << batch;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5 + 1e-4 * std::fabs(want[i]))
          << "batch " << batch << " parameter " << i;
    }
    auto eval = m.Evaluate(x.data(), y.data(), batch);
    ASSERT_TRUE(eval.ok());
    const EvalResult ref_eval = ref.Evaluate(params.data(), x.data(), y.data(), batch);
    EXPECT_NEAR(eval->mean_loss, ref_eval.mean_loss, 1e-5);
    EXPECT_EQ(eval->correct, ref_eval.correct);
    EXPECT_EQ(eval->n, batch);
  }
}

// examples/models/mlp.py --init=gradsync draws exactly what the built-in
// MLP's InitParams draws for the seed (std::mt19937_64 reimplemented in
// Python), so the two start from the same bits.
TEST_F(TorchModelTest, GradsyncInitIsTheBuiltInMlpsBitForBit) {
  auto model = Load("mlp_gradsync_init.pt");
  ASSERT_TRUE(model.ok()) << model.status();
  Mlp ref(MlpSpec{{20, 16, 8, 10}});
  std::vector<float> want(ref.num_params()), got((*model)->num_params());
  ASSERT_EQ(got.size(), want.size());
  ref.InitParams(7, want.data());
  ASSERT_TRUE((*model)->GetParams(got.data()).ok());
  EXPECT_EQ(got, want);
}

// Overlap: bucket 0 (the last layers) is announced while backward still
// runs, so at that moment the first layer's gradient has not been written
// (it is still the zeros the model starts with); after backward it has.
TEST_F(TorchModelTest, AnnouncesBucketsInOrderDuringBackward) {
  auto model = Load("lenet.pt", 784, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  DeviceModel& m = **model;
  const std::vector<Range> buckets = MakeBuckets(m, 4);  // one per parameter
  ASSERT_EQ(static_cast<int>(buckets.size()), m.num_layers());
  ASSERT_TRUE(m.Configure(buckets, OptimizerOptions{}, 2).ok());
  const int batch = 8;
  const std::vector<float> x = RandomX(batch, 784, 3);
  const std::vector<uint8_t> y(batch, 4);
  ASSERT_TRUE(m.StageBatch(x.data(), y.data(), batch).ok());
  const Range first = buckets.back();  // conv1.weight
  std::vector<float> first_at_0(first.size, 1.0f), got(m.num_params());
  std::vector<int> order;
  ASSERT_TRUE(m.ForwardBackward(batch, [&](int b) {
                 order.push_back(b);
                 ASSERT_TRUE(m.StartGradCopy(b, 0, got.data() + buckets[b].begin).ok());
                 if (b == 0) {
                   ASSERT_TRUE(m.StartGradCopy(static_cast<int>(buckets.size()) - 1, 1,
                                               first_at_0.data())
                                   .ok());
                 }
               }).ok());
  ASSERT_EQ(order.size(), buckets.size());
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], static_cast<int>(i));
  double at0 = 0, after = 0;
  for (size_t i = 0; i < first.size; ++i) {
    at0 += std::fabs(first_at_0[i]);
    after += std::fabs(got[first.begin + i]);
  }
  EXPECT_EQ(at0, 0.0) << "bucket 0 was announced after the first layer's gradient was in";
  EXPECT_GT(after, 0.0);
  ASSERT_TRUE(m.TakeLoss().ok());
}

// The replica trains as PyTorch's own loop does: the losses of 20 SGD
// steps on lenet.pt match those make_torch_models.py recorded.
TEST_F(TorchModelTest, LeNetFollowsPyTorchsTrainingLoop) {
  std::vector<float> want;
  {
    std::ifstream in(ModelDir() + "/lenet_losses.txt");
    for (float v; in >> v;) want.push_back(v);
  }
  ASSERT_EQ(want.size(), 20u);
  auto model = Load("lenet.pt", 784, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  DeviceModel& m = **model;
  const std::vector<Range> buckets = MakeBuckets(m, 64 << 10);
  OptimizerOptions sgd;
  sgd.lr = 0.05f;
  sgd.momentum = 0.9f;
  ASSERT_TRUE(m.Configure(buckets, sgd, 2).ok());
  const int batch = 16;
  std::vector<float> x(batch * 784);
  for (int i = 0; i < batch; ++i) {
    for (int j = 0; j < 784; ++j)
      x[i * 784 + j] = static_cast<float>((i * 31 + j * 7) % 17) / 17.0f;
  }
  std::vector<uint8_t> y(batch);
  for (int i = 0; i < batch; ++i) y[i] = static_cast<uint8_t>(i % 10);
  ASSERT_TRUE(m.StageBatch(x.data(), y.data(), batch).ok());
  std::vector<float> g(m.num_params());
  for (int step = 0; step < 20; ++step) {
    ASSERT_TRUE(m.ForwardBackward(batch, [&](int b) {
                   ASSERT_TRUE(m.StartGradCopy(b, 0, g.data() + buckets[b].begin).ok());
                 }).ok());
    for (size_t b = 0; b < buckets.size(); ++b) {
      ASSERT_TRUE(m.ApplyGradient(static_cast<int>(b), g.data() + buckets[b].begin).ok());
    }
    auto loss = m.TakeLoss();
    ASSERT_TRUE(loss.ok());
    ASSERT_NEAR(*loss, want[step], 1e-4 + 1e-4 * want[step]) << "step " << step;
  }
  auto eval = m.Evaluate(x.data(), y.data(), batch);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(eval->n, batch);
  // The parameters the optimizer moved are the module's: a second replica
  // given them computes the same loss.
  std::vector<float> p(m.num_params());
  ASSERT_TRUE(m.GetParams(p.data()).ok());
  auto other = Load("lenet.pt", 784, 10);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->SetParams(p.data()).ok());
  auto eval2 = (*other)->Evaluate(x.data(), y.data(), batch);
  ASSERT_TRUE(eval2.ok());
  EXPECT_NEAR(eval2->mean_loss, eval->mean_loss, 1e-6);
}

TEST_F(TorchModelTest, OwnGradientEqualsCopyAndApply) {
  auto a = Load("mlp.pt");
  auto b = Load("mlp.pt");
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<Range> buckets = MakeBuckets(**a, 256);
  OptimizerOptions adam;
  adam.kind = OptimizerKind::kAdam;
  adam.lr = 0.01f;
  ASSERT_TRUE((*a)->Configure(buckets, adam, 2).ok());
  ASSERT_TRUE((*b)->Configure(buckets, adam, 2).ok());
  const std::vector<float> x = RandomX(4, 20, 9);
  const std::vector<uint8_t> y = {1, 2, 3, 4};
  std::vector<float> g((*a)->num_params());
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE((*a)->StageBatch(x.data(), y.data(), 4).ok());
    ASSERT_TRUE((*b)->StageBatch(x.data(), y.data(), 4).ok());
    ASSERT_TRUE((*a)->ForwardBackward(4, [](int) {}).ok());
    ASSERT_TRUE(
        (*b)->ForwardBackward(
                4,
                [&](int k) {
                  ASSERT_TRUE(
                      (*b)->StartGradCopy(k, 0, g.data() + buckets[k].begin).ok());
                })
            .ok());
    for (size_t k = 0; k < buckets.size(); ++k) {
      ASSERT_TRUE((*a)->ApplyOwnGradient(static_cast<int>(k)).ok());
      ASSERT_TRUE(
          (*b)->ApplyGradient(static_cast<int>(k), g.data() + buckets[k].begin).ok());
    }
    ASSERT_TRUE((*a)->TakeLoss().ok());
    ASSERT_TRUE((*b)->TakeLoss().ok());
  }
  std::vector<float> pa(g.size()), pb(g.size());
  ASSERT_TRUE((*a)->GetParams(pa.data()).ok());
  ASSERT_TRUE((*b)->GetParams(pb.data()).ok());
  EXPECT_EQ(pa, pb);
  // Adam's moments come out laid out as the parameters and go back in.
  OptimizerState st;
  ASSERT_TRUE((*a)->GetOptimizerState(&st).ok());
  EXPECT_EQ(st.steps, 3);
  EXPECT_EQ(st.first.size(), g.size());
  EXPECT_EQ(st.second.size(), g.size());
  ASSERT_TRUE((*b)->SetOptimizerState(st).ok());
  OptimizerState short_state = st;
  short_state.first.pop_back();
  EXPECT_EQ((*b)->SetOptimizerState(short_state).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TorchModelTest, TheModuleComputesOnPredictedParameters) {
  // Weight prediction moves the flat vector the module's parameters view:
  // the gradient taken between PredictParams and RestoreParams is the
  // gradient at the predicted parameters, bit for bit.
  auto a = Load("lenet.pt", 784, 10);
  auto b = Load("lenet.pt", 784, 10);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<Range> buckets = MakeBuckets(**a, 1 << 20);
  OptimizerOptions sgd;
  sgd.kind = OptimizerKind::kSgd;
  sgd.lr = 0.05f;
  ASSERT_TRUE((*a)->Configure(buckets, sgd, 3).ok());
  ASSERT_TRUE((*b)->Configure(buckets, sgd, 3).ok());
  const std::vector<float> x = RandomX(4, 784, 3);
  const std::vector<uint8_t> y = {1, 2, 3, 4};
  const size_t n = (*a)->num_params();
  auto gradient = [&](DeviceModel* m) {
    std::vector<float> g(n);
    EXPECT_TRUE(m->StageBatch(x.data(), y.data(), 4).ok());
    EXPECT_TRUE(m->ForwardBackward(4, [&](int k) {
                   EXPECT_TRUE(m->StartGradCopy(k, 0, g.data() + buckets[k].begin).ok());
                 }).ok());
    EXPECT_TRUE(m->TakeLoss().ok());
    return g;
  };
  ASSERT_TRUE((*a)->PredictParams(1.0f).ok());
  const std::vector<float> g0 = gradient(a->get());
  ASSERT_TRUE((*a)->RestoreParams().ok());
  for (size_t k = 0; k < buckets.size(); ++k) {
    ASSERT_TRUE(
        (*a)->ApplyGradient(static_cast<int>(k), g0.data() + buckets[k].begin).ok());
  }
  std::vector<float> w(n);
  ASSERT_TRUE((*a)->GetParams(w.data()).ok());
  ASSERT_TRUE((*a)->PredictParams(2.0f).ok());
  std::vector<float> predicted(n);
  ASSERT_TRUE((*a)->GetParams(predicted.data()).ok());
  EXPECT_NE(predicted, w);
  const std::vector<float> g_predicted = gradient(a->get());
  ASSERT_TRUE((*a)->RestoreParams().ok());
  ASSERT_TRUE((*b)->SetParams(predicted.data()).ok());
  EXPECT_EQ(gradient(b->get()), g_predicted);
  ASSERT_TRUE((*b)->SetParams(w.data()).ok());
  EXPECT_NE(gradient(b->get()), g_predicted);
  std::vector<float> after(n);
  ASSERT_TRUE((*a)->GetParams(after.data()).ok());
  EXPECT_EQ(after, w);
}

TEST_F(TorchModelTest, ACustomLossMethodIsTheTrainingLoss) {
  auto model = Load("custom_loss.pt");
  ASSERT_TRUE(model.ok()) << model.status();
  DeviceModel& m = **model;
  ASSERT_TRUE(m.Configure(MakeBuckets(m, 1 << 20), OptimizerOptions{}, 2).ok());
  const std::vector<float> x = RandomX(3, 20, 11);
  const std::vector<uint8_t> y = {0, 5, 9};
  ASSERT_TRUE(m.StageBatch(x.data(), y.data(), 3).ok());
  ASSERT_TRUE(m.ForwardBackward(3, [](int) {}).ok());
  auto loss = m.TakeLoss();
  ASSERT_TRUE(loss.ok());
  // Squared error over one-hot targets: small for a fresh linear layer,
  // unlike cross-entropy over 10 classes (about ln 10 = 2.3).
  EXPECT_LT(*loss, 1.0f);
  auto eval = m.Evaluate(x.data(), y.data(), 3);
  ASSERT_TRUE(eval.ok());
  EXPECT_NEAR(eval->mean_loss, *loss, 1e-5);
}

TEST_F(TorchModelTest, AParameterOutsideTheLossGetsAZeroGradient) {
  auto model = Load("unused.pt");
  ASSERT_TRUE(model.ok()) << model.status();
  DeviceModel& m = **model;
  const std::vector<Range> buckets = MakeBuckets(m, 4);
  ASSERT_TRUE(m.Configure(buckets, OptimizerOptions{}, 2).ok());
  const std::vector<float> x = RandomX(2, 20, 13);
  const std::vector<uint8_t> y = {3, 4};
  ASSERT_TRUE(m.StageBatch(x.data(), y.data(), 2).ok());
  std::vector<float> g(m.num_params(), 7.0f);
  int announced = 0;
  ASSERT_TRUE(m.ForwardBackward(2, [&](int b) {
                 ++announced;
                 ASSERT_TRUE(m.StartGradCopy(b, 0, g.data() + buckets[b].begin).ok());
               }).ok());
  EXPECT_EQ(announced, static_cast<int>(buckets.size()));
  const Range spare_w = m.LayerRange(2);  // spare.weight
  for (size_t i = spare_w.begin; i < spare_w.end(); ++i) ASSERT_EQ(g[i], 0.0f);
}

// Every example in examples/models loads and takes training steps through
// the DeviceModel: LeNet and the ResNet (batch norm) on Fashion-MNIST's
// shape, the character transformer on 32 byte ids and 128 classes.
TEST_F(TorchModelTest, TheExamplesTrain) {
  struct Example {
    const char* file;
    int features, classes;
    float max_id;  // inputs drawn in [0, max_id)
  };
  for (const Example& e :
       {Example{"lenet.pt", 784, 10, 1.0f}, Example{"resnet.pt", 784, 10, 1.0f},
        Example{"charlm.pt", 32, 128, 128.0f}}) {
    SCOPED_TRACE(e.file);
    auto model = Load(e.file, e.features, e.classes);
    ASSERT_TRUE(model.ok()) << model.status();
    DeviceModel& m = **model;
    const std::vector<Range> buckets = MakeBuckets(m, 64 << 10);
    OptimizerOptions adam;
    adam.kind = OptimizerKind::kAdam;
    adam.lr = 0.003f;
    ASSERT_TRUE(m.Configure(buckets, adam, 2).ok());
    const int batch = 8;
    std::vector<float> x = RandomX(batch, e.features, 17);
    for (float& v : x) v = std::floor(v * e.max_id * 0.999f) + (e.max_id > 1 ? 0 : v);
    std::vector<uint8_t> y(batch);
    for (int i = 0; i < batch; ++i) y[i] = static_cast<uint8_t>((i * 5) % e.classes);
    ASSERT_TRUE(m.StageBatch(x.data(), y.data(), batch).ok());
    float first = 0, last = 0;
    for (int step = 0; step < 5; ++step) {
      ASSERT_TRUE(m.ForwardBackward(batch, [](int) {}).ok());
      for (size_t b = 0; b < buckets.size(); ++b) {
        ASSERT_TRUE(m.ApplyOwnGradient(static_cast<int>(b)).ok());
      }
      auto loss = m.TakeLoss();
      ASSERT_TRUE(loss.ok());
      ASSERT_TRUE(std::isfinite(*loss));
      if (step == 0) first = *loss;
      last = *loss;
    }
    EXPECT_LT(last, first);
    auto eval = m.Evaluate(x.data(), y.data(), batch);
    ASSERT_TRUE(eval.ok()) << eval.status();
  }
}

TEST_F(TorchModelTest, TensorDataIsFlattenedAndHeldOut) {
  auto d = LoadTensorData(ModelDir() + "/data_good.pt");
  ASSERT_TRUE(d.ok()) << d.status();
  // 50 samples of [4, 5] float64: the last tenth (5) is the test set.
  EXPECT_EQ(d->train.n, 45);
  EXPECT_EQ(d->test.n, 5);
  EXPECT_EQ(d->train.features, 20);
  EXPECT_EQ(d->train.classes, 3);
  EXPECT_EQ(d->train.images[20 * 2 + 3], 43.0f);  // sample 2, value 3
  EXPECT_EQ(d->test.images[0], 45.0f * 20);       // sample 45 comes first
  EXPECT_EQ(d->train.labels[4], 1);
  EXPECT_EQ(d->test.labels[0], 45 % 3);
  auto split = LoadTensorData(ModelDir() + "/data_split.pt");
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->train.n, 50);
  EXPECT_EQ(split->test.n, 7);
  EXPECT_EQ(split->train.classes, 5);  // the test labels reach class 4
  EXPECT_EQ(split->test.classes, 5);
}

TEST_F(TorchModelTest, RefusesTensorDataThatBreaksTheFormat) {
  struct Case {
    const char* file;
    const char* says;
  };
  const Case cases[] = {
      {"data_list.pt", "not a dict"},
      // A one-entry dict pickles with SETITEM, which libtorch's unpickler
      // does not read: refused, with the format it wants.
      {"data_no_y.pt", "want torch.save({\"x\": X, \"y\": Y}"},
      {"data_short_y.pt", "do not match"},
      {"data_float_y.pt", "want integer classes"},
      {"data_big_y.pt", "span [300, 302]"},
      {"data_negative_y.pt", "span [-1, 1]"},
      {"data_half_split.pt", "only one of"},
      {"data_one.pt", "nothing to hold out"},
      {"data_test_width.pt", "test samples have 10 values"},
      // Found by fuzz_tensor_data: reading these ran off the allocation.
      {"data_short_storage.pt",
       "training inputs [50, 4, 5] claims more values than the 12"},
      {"data_short_label_storage.pt",
       "training labels [50] claims more values than the 80"},
      // Issue 51: three such files grew a worker by 1.6 GB.
      {"data_expanded.pt", "training inputs [100000, 784] would take 313700000 bytes"},
      {"not_torchscript.pt", "not a torch.save file"},
      {"lenet.pt", "not a torch.save file"},  // a TorchScript module is no data file
  };
  for (const Case& c : cases) {
    auto d = LoadTensorData(ModelDir() + "/" + c.file);
    ASSERT_FALSE(d.ok()) << c.file;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
    EXPECT_NE(d.status().message().find(c.says), std::string::npos)
        << c.file << ": " << d.status();
  }
  EXPECT_EQ(LoadTensorData(ModelDir() + "/missing.pt").status().code(),
            absl::StatusCode::kNotFound);
}

// fuzz_tensor_data found a file whose zip directory points past its end:
// torch::jit::pickle_load's reader copied from beyond the buffer. Read
// through tensor_data.cc's bounded adapter it is an error like any other.
TEST_F(TorchModelTest, AZipDirectoryPastTheEndIsAnErrorNotARead) {
  const std::string file =
      std::string(GRADSYNC_SOURCE_DIR) +
      "/tests/fuzz/corpus/fuzz_tensor_data/regress-zip-directory-past-end";
  auto d = LoadTensorData(file);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_NE(d.status().message().find("not a torch.save file"), std::string::npos)
      << d.status();
}

// A forward that swaps a parameter for a larger tensor (it passed the load's
// dry run) fails the step naming the parameter, instead of its gradient
// overrunning the slot laid out for it (issue 51: both workers aborted).
TEST_F(TorchModelTest, AModelThatSwapsAParameterFailsTheStepAndNothingOverruns) {
  auto model = Load("swaps_parameter.pt");
  ASSERT_TRUE(model.ok()) << model.status();
  DeviceModel& m = **model;
  ASSERT_TRUE(m.Configure(MakeBuckets(m, 1 << 20), OptimizerOptions{}, 2).ok());
  const std::vector<float> x = RandomX(2, 20, 5);
  const std::vector<uint8_t> y = {1, 2};
  ASSERT_TRUE(m.StageBatch(x.data(), y.data(), 2).ok());
  const absl::Status st = m.ForwardBackward(2, [](int) {});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("parameter 0"), std::string::npos) << st;
  EXPECT_NE(st.message().find("must not change its parameters"), std::string::npos) << st;
}

// A model's tensors past its budget (issue 51, finding 6): the allocation
// fails inside libtorch as out of memory, the step says so with
// RESOURCE_EXHAUSTED naming the flag, and the bytes it held are counted
// back. The same model without a budget takes its 64 MiB and trains.
TEST_F(TorchModelTest, TensorsPastTheMemoryBudgetFailTheStepAsOutOfMemory) {
  const std::vector<float> x = RandomX(2, 20, 5);
  const std::vector<uint8_t> y = {1, 2};
  const auto step = [&](int64_t budget) {
    auto model = Load("hog.pt", 20, 10, budget);
    if (!model.ok()) return model.status();
    DeviceModel& m = **model;
    if (absl::Status st = m.Configure(MakeBuckets(m, 1 << 20), OptimizerOptions{}, 2);
        !st.ok()) {
      return st;
    }
    if (absl::Status st = m.StageBatch(x.data(), y.data(), 2); !st.ok()) return st;
    return m.ForwardBackward(2, [](int) {});
  };
  const int64_t before = TorchMemoryInUse();
  const absl::Status over = step(int64_t{16} << 20);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted) << over;
  EXPECT_NE(over.message().find("out of memory"), std::string::npos) << over;
  EXPECT_NE(over.message().find("--max_job_memory: 16 MiB"), std::string::npos) << over;
  EXPECT_EQ(TorchMemoryInUse(), before);  // the model and its tensors are gone
  EXPECT_TRUE(step(0).ok());
  EXPECT_TRUE(step(int64_t{256} << 20).ok());
  EXPECT_EQ(TorchMemoryInUse(), before);
}

TEST(TorchErrorText, KeepsWhatFailedAndWhereAndMapsAllocationsToResourceExhausted) {
  const std::string interpreter =
      "The following operation failed in the TorchScript interpreter.\n"
      "Traceback of TorchScript (most recent call last):\n"
      "  File \"m.py\", line 6, in forward\n"
      "    def forward(s, x):\n"
      "        return s.fc(x.view(-1, 900))\n"
      "                    ~~~~~~ <--- HERE\n"
      "RuntimeError: shape '[-1, 900]' is invalid for input of size 40\n"
      "Exception raised from infer_size_impl at ../aten/src/ATen/InferSize.h:71\n";
  EXPECT_EQ(TorchErrorText(interpreter),
            "RuntimeError: shape '[-1, 900]' is invalid for input of size 40 "
            "(File \"m.py\", line 6, in forward)");
  EXPECT_EQ(TorchErrorText("plain error\nframe #0: ..."), "plain error");
  EXPECT_EQ(TorchErrorText(""), "");
  // An interpreter error without a recognisable line keeps its first line.
  EXPECT_EQ(TorchErrorText("The following operation failed in the TorchScript "
                           "interpreter.\nsomething else"),
            "The following operation failed in the TorchScript interpreter.");
  EXPECT_EQ(TorchError("forward", std::bad_alloc()).code(),
            absl::StatusCode::kResourceExhausted);
  const absl::Status cpu = TorchError(
      "forward",
      std::runtime_error("[enforce fail at alloc_cpu.cpp:75] data. "
                         "DefaultCPUAllocator: can't allocate memory: you tried "
                         "to allocate 4294967296 bytes."));
  EXPECT_EQ(cpu.code(), absl::StatusCode::kResourceExhausted) << cpu;
  EXPECT_NE(cpu.message().find("forward: "), std::string::npos) << cpu;
  EXPECT_EQ(TorchError("forward", std::runtime_error("bad shape")).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TorchModelTest, RefusesModulesThatBreakTheContract) {
  struct Case {
    const char* file;
    absl::StatusCode code;
    const char* says;
  };
  const Case cases[] = {
      {"missing.pt", absl::StatusCode::kNotFound, "not found"},
      {"not_torchscript.pt", absl::StatusCode::kInvalidArgument, "not a TorchScript"},
      {"noparams.pt", absl::StatusCode::kInvalidArgument, "no parameters"},
      {"wrong_output.pt", absl::StatusCode::kInvalidArgument, "logits [2, 10]"},
      // The line that names what failed, not only "The following operation
      // failed in the TorchScript interpreter".
      {"bad_view.pt", absl::StatusCode::kInvalidArgument,
       "RuntimeError: shape '[-1, 900]' is invalid for input of size 40"},
      {"double.pt", absl::StatusCode::kInvalidArgument, "float32"},
  };
  for (const Case& c : cases) {
    auto model = Load(c.file);
    ASSERT_FALSE(model.ok()) << c.file;
    EXPECT_EQ(model.status().code(), c.code) << c.file << ": " << model.status();
    EXPECT_NE(model.status().message().find(c.says), std::string::npos)
        << c.file << ": " << model.status();
    EXPECT_NE(model.status().message().find(c.file), std::string::npos)
        << "the error names the file: " << model.status();
  }
  // A model that loads but whose forward fails on a staged batch of another
  // width reports it from ForwardBackward, and the replica stays usable.
  auto model = Load("mlp.pt");
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE(
      (*model)->Configure(MakeBuckets(**model, 1 << 20), OptimizerOptions{}, 2).ok());
  EXPECT_EQ((*model)->ForwardBackward(4, [](int) {}).code(),
            absl::StatusCode::kFailedPrecondition);  // nothing staged
}

}  // namespace
}  // namespace gradsync
