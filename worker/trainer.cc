#include "worker/trainer.h"

#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/kernels.h"
#include "common/logging.h"
#include "worker/mlp.h"

namespace gradsync {

TrainingOutcome RunTraining(const v1::Assignment& a, const Dataset& train,
                            const Dataset& test, GradientSync* sync,
                            TrainingReporter* reporter,
                            const std::atomic<bool>* cancelled,
                            const TrainingOptions& options) {
  TrainingOutcome out;
  const v1::JobSpec& spec = a.spec();
  const int rank = a.rank();
  const int world = a.world_size();
  const std::string tag = JobTag(a.job_id(), rank);
  out.done.set_job_id(a.job_id());
  out.done.set_rank(rank);
  out.done.set_device("cpu");
  auto fail = [&](absl::Status st) {
    sync->Abort(st);
    out.status = st;
    out.done.set_code(static_cast<int>(st.code()));
    out.done.set_error(std::string(st.message()));
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

  const int64_t train_n = spec.train_limit() > 0
                              ? std::min<int64_t>(spec.train_limit(), train.n)
                              : train.n;
  const int batch = spec.batch_size();
  ShardedSampler sampler(train_n, world, rank, batch, spec.seed());
  const int64_t spe = sampler.StepsPerEpoch();
  if (spe <= 0) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "batch_size: a global batch of ", int64_t{world} * batch,
        " exceeds the ", train_n, " training samples")));
  }
  const int64_t total =
      spec.steps() > 0 ? spec.steps() : spe * std::max(1, spec.epochs());

  std::vector<int64_t> idx;
  std::vector<float> x(static_cast<size_t>(batch) * train.features);
  std::vector<uint8_t> y(batch);
  double comm = 0, compute = 0;
  double epoch_loss = 0, report_loss = 0, last_loss = 0;
  int64_t epoch_steps = 0, report_steps = 0;
  const absl::Time t0 = absl::Now();
  absl::Time epoch_start = t0, last_report = t0;
  bool sent_checksum = false;

  auto report = [&](int64_t steps_done, int epoch) {
    v1::WorkerMessage::Progress p;
    p.set_job_id(a.job_id());
    p.set_rank(rank);
    p.set_step(steps_done);
    p.set_total_steps(total);
    p.set_epoch(epoch);
    p.set_loss(report_steps ? report_loss / report_steps : 0);
    const absl::Time now = absl::Now();
    const double secs = absl::ToDoubleSeconds(now - last_report);
    p.set_samples_per_second(secs > 0 ? report_steps * batch / secs : 0);
    p.set_comm_seconds(comm);
    p.set_compute_seconds(compute);
    if (!sent_checksum) {
      p.set_init_checksum(init_sum);
      sent_checksum = true;
    }
    reporter->Progress(p);
    last_report = now;
    report_loss = 0;
    report_steps = 0;
  };
  report(0, 1);

  for (int64_t step = 0; step < total; ++step) {
    if (cancelled != nullptr && cancelled->load()) {
      return fail(absl::CancelledError("job cancelled"));
    }
    const int64_t epoch = step / spe;
    sampler.BatchIndices(epoch, step % spe, &idx);
    for (int i = 0; i < batch; ++i) {
      std::memcpy(x.data() + static_cast<size_t>(i) * train.features,
                  train.image(idx[i]), train.features * sizeof(float));
      y[i] = train.labels[idx[i]];
    }
    absl::Time t = absl::Now();
    const float loss =
        model.ForwardBackward(params.data(), x.data(), y.data(), batch, grad.data());
    absl::Time t2 = absl::Now();
    compute += absl::ToDoubleSeconds(t2 - t);
    if (!std::isfinite(loss)) {
      return fail(absl::OutOfRangeError(absl::StrCat(
          "loss became ", loss, " at step ", step, " (learning rate too high?)")));
    }
    st = sync->Step(step, grad.data(), params.data());
    comm += absl::ToDoubleSeconds(absl::Now() - t2);
    if (!st.ok()) return fail(st);
    last_loss = loss;
    epoch_loss += loss;
    report_loss += loss;
    ++epoch_steps;
    ++report_steps;
    const bool epoch_end = (step + 1) % spe == 0 || step + 1 == total;
    if (epoch_end) {
      v1::WorkerMessage::EpochDone e;
      e.set_job_id(a.job_id());
      e.set_rank(rank);
      e.set_epoch(static_cast<int>(epoch + 1));
      e.set_train_loss(epoch_loss / epoch_steps);
      e.set_test_accuracy(-1);
      if (rank == 0 && options.evaluate && test.n > 0) {
        e.set_test_accuracy(
            model.Evaluate(params.data(), test.images.data(),
                           test.labels.data(), test.n)
                .accuracy());
      }
      const absl::Time now = absl::Now();
      e.set_seconds(absl::ToDoubleSeconds(now - epoch_start));
      epoch_start = now;
      spdlog::info("{}epoch {} done: mean loss {:.4f}{}", tag, e.epoch(),
                   e.train_loss(),
                   rank == 0 ? absl::StrCat(", test accuracy ", e.test_accuracy())
                             : "");
      reporter->EpochDone(e);
      epoch_loss = 0;
      epoch_steps = 0;
    }
    if (absl::Now() - last_report >= options.progress_interval || step + 1 == total) {
      report(step + 1, static_cast<int>(epoch + 1));
    }
  }
  st = sync->Finish(params.data());
  if (!st.ok()) return fail(st);
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  out.done.set_code(0);
  out.done.set_param_checksum(ChecksumHex(params.data(), n));
  out.done.set_last_step_loss(last_loss);
  out.done.set_comm_seconds(comm);
  out.done.set_compute_seconds(compute);
  out.done.set_samples(total * batch);
  out.done.set_steps(total);
  out.done.set_wall_seconds(wall);
  out.done.set_test_accuracy(-1);
  if (rank == 0 && options.evaluate && test.n > 0) {
    out.done.set_test_accuracy(
        model.Evaluate(params.data(), test.images.data(), test.labels.data(),
                       test.n)
            .accuracy());
  }
  spdlog::info("{}done: {} steps in {:.2f} s (comm {:.2f} s), params {}", tag,
               total, wall, comm, out.done.param_checksum());
  return out;
}

}  // namespace gradsync
