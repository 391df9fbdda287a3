// The training loop on the GPU against the same loop on the CPU model:
// same seed and samples, 20 steps, TF32 off. Skips without a GPU.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "common/spec/job_spec.h"
#include "worker/model/cuda/cuda_backend.h"
#include "worker/model/cuda/cuda_model.h"
#include "worker/train/trainer.h"
#include "worker/sync/gradient_sync.h"
#include "worker/collectives/transport/inproc/inproc_transport.h"

namespace gradsync {
namespace {

class Quiet : public TrainingReporter {
 public:
  void Progress(const v1::WorkerMessage::Progress&) override {}
  void EpochDone(const v1::WorkerMessage::EpochDone&) override {}
};

std::vector<float> Train(const Dataset& data, bool gpu, const std::string& opt,
                         const std::string& mode) {
  v1::Assignment a;
  a.set_job_id(gpu ? "gpu" : "cpu");
  a.set_rank(0);
  a.set_world_size(1);
  v1::JobSpec* s = a.mutable_spec();
  s->set_strategy(v1::STRATEGY_RING);
  s->set_mode(*ParseSyncMode(mode));
  if (mode == "async") s->set_staleness(1);
  s->set_model("mlp:784-256-128-10");
  s->set_batch_size(37);
  s->set_steps(20);
  s->set_seed(3);
  s->set_optimizer(*ParseOptimizer(opt));
  s->set_lr(opt == "sgd" ? 0.05f : 0.001f);
  s->set_momentum(0.9f);
  s->set_bucket_bytes(200 << 10);
  s->set_chunk_bytes(1 << 20);
  s->set_step_timeout_ms(10000);
  MlpSpec spec = *ParseModelSpec(s->model());
  a.set_num_params(NumParams(spec));
  for (int w : spec.widths) a.add_layer_widths(w);
  InProcGroup group(1);
  auto sync = MakeGradientSync(&a, group.transport(0));
  EXPECT_TRUE(sync.ok());
  auto model = gpu ? cuda::MakeCudaModel(spec, 0, false, 37) : MakeCpuModel(spec);
  EXPECT_TRUE(model.ok()) << model.status();
  Quiet q;
  TrainingOptions o;
  o.evaluate = false;
  Dataset empty;
  TrainingOutcome out =
      RunTraining(a, data, empty, model->get(), sync->get(), &q, nullptr, o);
  EXPECT_TRUE(out.status.ok()) << out.status;
  return out.params;
}

double RelErr(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    n += double(b[i]) * b[i];
  }
  return std::sqrt(d / n);
}

TEST(CudaTrainer, TwentyStepsMatchTheCpu) {
  if (cuda::DeviceCount() == 0) {
    GTEST_SKIP() << "no CUDA GPU: DeviceCount() == 0";
  }
  auto data = LoadFashionMnist(kDefaultFashionMnistDir, true, 2048);
  ASSERT_TRUE(data.ok()) << data.status();
  for (const char* opt : {"sgd", "adam"}) {
    for (const char* mode : {"sync", "async"}) {
      auto cpu = Train(*data, false, opt, mode);
      auto gpu = Train(*data, true, opt, mode);
      ASSERT_EQ(cpu.size(), gpu.size());
      ASSERT_FALSE(cpu.empty());
      const double e = RelErr(gpu, cpu);
      EXPECT_LE(e, 1e-4) << opt << " " << mode << ": relative error " << e;
      std::cout << opt << " " << mode << ": GPU vs CPU relative error " << e << "\n";
    }
  }
}

}  // namespace
}  // namespace gradsync
