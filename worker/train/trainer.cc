#include "worker/train/trainer.h"

#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/kernels.h"
#include "common/logging.h"
#include "worker/model/mlp.h"
#include "worker/train/training_steps.h"

namespace gradsync {

TrainingOutcome RunTraining(const v1::Assignment& a, const Dataset& train,
                            const Dataset& test, GradientSync* sync,
                            TrainingReporter* reporter,
                            const std::atomic<bool>* cancelled,
                            const TrainingOptions& options) {
  TrainingOutcome out = NewOutcome(a, "cpu");
  const v1::JobSpec& spec = a.spec();
  const std::string tag = JobTag(a.job_id(), a.rank());
  auto fail = [&](absl::Status st) {
    sync->Abort(st);
    RecordFailure(st, &out);
    return out;
  };

  absl::StatusOr<MlpSpec> model_spec = ParseModelSpec(spec.model());
  if (!model_spec.ok()) return fail(model_spec.status());
  if (model_spec->widths.front() != train.features) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "model: input width ", model_spec->widths.front(), " but the data has ",
        train.features, " features")));
  }
  Mlp model(*model_spec);
  const size_t n = model.num_params();
  std::vector<float>& params = out.params;
  params.assign(n, 0.0f);
  std::vector<float> grad(n);
  model.InitParams(spec.seed(), params.data());

  absl::Status st = sync->Initialize(params.data());
  if (!st.ok()) return fail(st);
  const std::string init_sum = ChecksumHex(params.data(), n);
  spdlog::info("{}initial parameters {} ({} floats)", tag, init_sum, n);

  absl::StatusOr<StepPlan> plan = StepPlan::Make(a, train);
  if (!plan.ok()) return fail(plan.status());
  const int64_t total = plan->total();
  const int batch = plan->batch();
  StepReports reports(a, *plan, init_sum, reporter, options);
  auto test_accuracy = [&]() -> absl::StatusOr<double> {
    if (test.n == 0) return -1.0;
    return model
        .Evaluate(params.data(), test.images.data(), test.labels.data(), test.n)
        .accuracy();
  };
  double comm = 0, compute = 0;
  const absl::Time t0 = absl::Now();
  reports.Start();

  for (int64_t step = 0; step < total; ++step) {
    if (cancelled != nullptr && cancelled->load()) {
      return fail(absl::CancelledError("job cancelled"));
    }
    plan->Gather(step);
    absl::Time t = absl::Now();
    const float loss =
        model.ForwardBackward(params.data(), plan->x(), plan->y(), batch, grad.data());
    absl::Time t2 = absl::Now();
    compute += absl::ToDoubleSeconds(t2 - t);
    if (!std::isfinite(loss)) {
      return fail(absl::OutOfRangeError(absl::StrCat(
          "loss became ", loss, " at step ", step, " (learning rate too high?)")));
    }
    st = sync->Step(step, grad.data(), params.data());
    comm += absl::ToDoubleSeconds(absl::Now() - t2);
    if (!st.ok()) return fail(st);
    st = reports.StepDone(step, loss, comm, compute, test_accuracy);
    if (!st.ok()) return fail(st);
  }
  st = sync->Finish(params.data());
  if (!st.ok()) return fail(st);
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  st = RecordSuccess(a, *plan, reports, params.data(), n, wall, options,
                     test_accuracy, &out);
  if (!st.ok()) return fail(st);
  out.done.set_comm_seconds(comm);
  out.done.set_compute_seconds(compute);
  spdlog::info("{}done: {} steps in {:.2f} s (comm {:.2f} s), params {}", tag,
               total, wall, comm, out.done.param_checksum());
  return out;
}

}  // namespace gradsync
