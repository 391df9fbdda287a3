// A one-rank gradsync job on a TorchScript model against a plain libtorch
// training loop of the same module, batch, optimizer and threads, in one
// process and one run (issue: "no hidden cost", target <= 1.05x).
//
//   torch_step_compare --model=lenet.pt [--batch=32] [--steps=300] [--reps=3]
//                      [--threads=1] [--lr=0.001] [--data_dir=DIR]
//
// Each repetition times `steps` steps of each loop, alternating which goes
// first; the table shows every repetition and the medians, and the last line
// is "ratio gradsync/plain: R" (step time; < 1 is faster). The plain loop is
// what a libtorch user writes: forward, cross-entropy, backward,
// torch::optim::{Adam,SGD}::step. The gradsync loop is RunTraining, the worker's
// training loop, on the TorchScript DeviceModel with a one-rank allreduce
// (the identity: gradients are applied where backward left them).
#include <ATen/Parallel.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/spec/job_limits.h"
#include "common/spec/job_options.h"
#include "spdlog/spdlog.h"
#include "worker/collectives/transport/inproc/inproc_transport.h"
#include "worker/model/dataset.h"
#include "worker/model/torch/memory_budget.h"
#include "worker/model/torch/torch_model.h"
#include "worker/sync/gradient_sync_factory.h"
#include "worker/train/trainer.h"

ABSL_FLAG(std::string, model, "", "TorchScript file (examples/models/*.py write them)");
ABSL_FLAG(std::string, data_dir, gradsync::kDefaultFashionMnistDir,
          "Fashion-MNIST directory");
ABSL_FLAG(int, batch, 32, "batch size");
ABSL_FLAG(int, steps, 300, "timed steps per loop and repetition");
ABSL_FLAG(int, reps, 3, "repetitions (medians are reported)");
ABSL_FLAG(int, threads, 1, "libtorch intra-op threads, both loops");
ABSL_FLAG(double, lr, 0.001, "learning rate, both loops");
ABSL_FLAG(std::string, optimizer, "adam", "adam, or sgd with momentum 0.9; both loops");
ABSL_FLAG(int64_t, budget_bytes, 0,
          "> 0: also time the gradsync loop with this --max_job_memory budget (the "
          "counting CPU allocator, worker/model/torch/memory_budget.h) and print "
          "\"ratio budget/none\" against the gradsync loop on libtorch's own allocator");

namespace gradsync {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The plain loop: its own copy of the module, batches in order.
double PlainSeconds(const Dataset& data, int batch, int steps) {
  torch::jit::Module m = torch::jit::load(absl::GetFlag(FLAGS_model), torch::kCPU);
  m.train();
  std::vector<at::Tensor> params;
  for (const at::Tensor& p : m.parameters()) params.push_back(p);
  const double lr = absl::GetFlag(FLAGS_lr);
  std::unique_ptr<torch::optim::Optimizer> opt;
  if (absl::GetFlag(FLAGS_optimizer) == "sgd") {
    opt = std::make_unique<torch::optim::SGD>(params,
                                              torch::optim::SGDOptions(lr).momentum(0.9));
  } else {
    opt = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr));
  }
  const int64_t per_epoch = data.n / batch;
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    const int64_t first = (s % per_epoch) * batch;
    at::Tensor x = torch::from_blob(const_cast<float*>(data.image(first)),
                                    {batch, data.features}, at::kFloat);
    at::Tensor y = torch::from_blob(const_cast<uint8_t*>(data.labels.data() + first),
                                    {batch}, at::kByte)
                       .to(at::kLong);
    opt->zero_grad();
    at::Tensor loss = at::cross_entropy_loss(m.forward({x}).toTensor(), y);
    loss.backward();
    opt->step();
    (void)loss.item<float>();  // gradsync reads every step's loss too
  }
  return Seconds(start);
}

// RunTraining on one rank.
double GradsyncSeconds(const Dataset& data, int batch, int steps, int64_t budget = 0) {
  JobOptions job;
  job.job_id = "bench";
  job.world_size = 1;
  job.strategy = SyncStrategy::kAllreduce;
  job.batch_size = batch;
  job.steps = steps;
  job.seed = 1;
  job.bucket_bytes = kDefaultBucketBytes;
  job.optimizer.kind = absl::GetFlag(FLAGS_optimizer) == "sgd" ? OptimizerKind::kSgd
                                                               : OptimizerKind::kAdam;
  job.optimizer.momentum = 0.9f;
  job.optimizer.lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  job.torchscript_sha256 = "bench";
  InProcGroup group(1);
  auto sync = MakeGradientSync(&job, group.transport(0));
  TorchModelOptions o;
  o.path = absl::GetFlag(FLAGS_model);
  o.features = data.features;
  o.classes = data.classes;
  o.threads = absl::GetFlag(FLAGS_threads);
  o.max_memory_bytes = budget;
  auto model = MakeTorchScriptModel(o);
  if (!sync.ok() || !model.ok()) {
    std::fprintf(stderr, "torch_step_compare: %s\n",
                 (!sync.ok() ? sync.status() : model.status()).ToString().c_str());
    std::exit(1);
  }
  class Quiet : public TrainingReporter {
    void Progress(const ProgressReport&) override {}
    void EpochDone(const EpochReport&) override {}
  } quiet;
  TrainingOptions opts;
  opts.evaluate = false;
  const auto start = std::chrono::steady_clock::now();
  TrainingOutcome out =
      RunTraining(job, data, data, model->get(), sync->get(), &quiet, nullptr, opts);
  const double s = Seconds(start);
  model->reset();
  RestoreLibtorchCpuAllocator();
  if (!out.status.ok()) {
    std::fprintf(stderr, "torch_step_compare: %s\n", out.status.ToString().c_str());
    std::exit(1);
  }
  return s;
}

int Main() {
  const int batch = absl::GetFlag(FLAGS_batch);
  const int steps = absl::GetFlag(FLAGS_steps);
  const int reps = absl::GetFlag(FLAGS_reps);
  const std::string optimizer = absl::GetFlag(FLAGS_optimizer);
  if (absl::GetFlag(FLAGS_model).empty() || batch < 1 || steps < 1 || reps < 1 ||
      (optimizer != "adam" && optimizer != "sgd")) {
    std::fprintf(stderr,
                 "torch_step_compare: --model is required; --batch, --steps and "
                 "--reps must be >= 1; --optimizer adam or sgd (--help)\n");
    return 2;
  }
  at::set_num_threads(absl::GetFlag(FLAGS_threads));
  auto data =
      LoadFashionMnist(absl::GetFlag(FLAGS_data_dir), true,
                       std::max<int64_t>(static_cast<int64_t>(batch) * steps, 8192));
  if (!data.ok()) {
    std::fprintf(stderr, "torch_step_compare: %s\n", data.status().ToString().c_str());
    return 1;
  }
  std::printf("model %s, %s, batch %d, %d steps x %d reps, %d threads\n",
              absl::GetFlag(FLAGS_model).c_str(), optimizer.c_str(), batch, steps, reps,
              absl::GetFlag(FLAGS_threads));
  const int64_t budget = absl::GetFlag(FLAGS_budget_bytes);
  std::printf("%-4s %14s %14s%s\n", "rep", "plain ms/step", "gradsync ms/step",
              budget > 0 ? "  with budget" : "");
  std::vector<double> plain, ours, budgeted;
  for (int r = 0; r < reps; ++r) {
    double p, g;
    if (r % 2 == 0) {
      p = PlainSeconds(*data, batch, steps);
      g = GradsyncSeconds(*data, batch, steps);
    } else {
      g = GradsyncSeconds(*data, batch, steps);
      p = PlainSeconds(*data, batch, steps);
    }
    plain.push_back(p * 1e3 / steps);
    ours.push_back(g * 1e3 / steps);
    if (budget > 0) {
      budgeted.push_back(GradsyncSeconds(*data, batch, steps, budget) * 1e3 / steps);
      std::printf("%-4d %14.3f %14.3f %12.3f\n", r, plain.back(), ours.back(),
                  budgeted.back());
    } else {
      std::printf("%-4d %14.3f %14.3f\n", r, plain.back(), ours.back());
    }
  }
  std::printf("median %12.3f %14.3f\n", Median(plain), Median(ours));
  std::printf("ratio gradsync/plain: %.3f\n", Median(ours) / Median(plain));
  if (budget > 0) {
    std::printf("ratio budget/none: %.3f\n", Median(budgeted) / Median(ours));
  }
  return 0;
}

}  // namespace
}  // namespace gradsync

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "one-rank gradsync job vs a plain libtorch loop on a TorchScript model");
  absl::ParseCommandLine(argc, argv);
  spdlog::set_level(spdlog::level::warn);  // the training loop's info lines
  return gradsync::Main();
}
