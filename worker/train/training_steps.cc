#include "worker/train/training_steps.h"

#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/kernels.h"
#include "common/logging.h"

namespace gradsync {

absl::StatusOr<StepPlan> StepPlan::Make(const JobOptions& job, const Dataset& train) {
  const int64_t train_n =
      job.train_limit > 0 ? std::min<int64_t>(job.train_limit, train.n) : train.n;
  const int64_t global =
      job.global_batch > 0 ? job.global_batch : int64_t{job.world_size} * job.batch_size;
  ShardedSampler sampler(train_n, job.world_size, job.rank, job.batch_size, job.seed,
                         global);
  const int64_t spe = sampler.StepsPerEpoch();
  if (spe <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size: a global batch of ", global, " exceeds the ", train_n,
        " training samples (or cannot be split over ", job.world_size, " ranks)"));
  }
  const int64_t total = job.steps > 0 ? job.steps : spe * std::max(1, job.epochs);
  const int batch = sampler.batch();
  // Each rank's gradient is the mean over its slice; weighted by
  // slice * world / G, the ranks' average is the mean over all G samples.
  const double weight = static_cast<double>(batch) * job.world_size / global;
  return StepPlan(train, std::move(sampler), batch, total, weight);
}

StepPlan::StepPlan(const Dataset& train, ShardedSampler sampler, int batch, int64_t total,
                   double gradient_weight)
    : train_(&train),
      sampler_(std::move(sampler)),
      batch_(batch),
      gradient_weight_(gradient_weight),
      spe_(sampler_.StepsPerEpoch()),
      total_(total),
      x_(static_cast<size_t>(batch) * train.features),
      y_(batch) {}

void StepPlan::Gather(int64_t step) {
  sampler_.BatchIndices(epoch(step), step % spe_, &idx_);
  const size_t f = train_->features;
  for (int i = 0; i < batch_; ++i) {
    std::memcpy(x_.data() + i * f, train_->image(idx_[i]), f * sizeof(float));
    y_[i] = train_->labels[idx_[i]];
  }
}

StepReports::StepReports(const JobOptions& job, const StepPlan& plan,
                         std::string init_checksum, TrainingReporter* reporter,
                         const TrainingOptions& options)
    : job_(job),
      plan_(plan),
      init_checksum_(std::move(init_checksum)),
      reporter_(reporter),
      options_(options),
      epoch_start_(options_.env->Now()),
      last_report_(epoch_start_) {}

void StepReports::Start(int64_t start_step) {
  epochs_done_ = start_step / plan_.steps_per_epoch();
  Progress(start_step, static_cast<int>(plan_.epoch(start_step)) + 1, 0, 0,
           job_.job_wide_steps ? start_step : 0);
}

void StepReports::Progress(int64_t steps_done, int epoch, double comm, double compute,
                           int64_t job_step) {
  ProgressReport p;
  p.job_id = job_.job_id;
  p.rank = job_.rank;
  p.step = steps_done;
  p.total_steps = plan_.total();
  p.job_step = job_step;
  p.epoch = epoch;
  p.loss = report_steps_ ? report_loss_ / report_steps_ : 0;
  const absl::Time now = options_.env->Now();
  const double secs = absl::ToDoubleSeconds(now - last_report_);
  p.samples_per_second = secs > 0 ? report_steps_ * plan_.batch() / secs : 0;
  p.comm_seconds = comm;
  p.compute_seconds = compute;
  if (!sent_checksum_) {
    p.init_checksum = init_checksum_;
    sent_checksum_ = true;
  }
  reporter_->Progress(p);
  last_report_ = now;
  report_loss_ = 0;
  report_steps_ = 0;
}

absl::Status StepReports::StepDone(
    int64_t step, float loss, double comm, double compute,
    const std::function<absl::StatusOr<double>()>& test_accuracy, int64_t job_pushes,
    bool last) {
  last_loss_ = loss;
  epoch_loss_ += loss;
  report_loss_ += loss;
  ++epoch_steps_;
  ++report_steps_;
  std::optional<double> accuracy;
  const bool due = options_.env->Now() - last_report_ >= options_.progress_interval;
  if (job_pushes < 0) {
    const int epoch = static_cast<int>(plan_.epoch(step) + 1);
    if (plan_.EpochEnds(step)) {
      absl::Status st = EndEpoch(epoch, 0, test_accuracy, &accuracy);
      if (!st.ok()) return st;
    }
    if (due || step + 1 == plan_.total()) Progress(step + 1, epoch, comm, compute);
    return absl::OkStatus();
  }
  const int64_t job_step = std::min(job_pushes / job_.world_size, plan_.total());
  while (epochs_done_ < plan_.epochs() &&
         (last || job_step >= plan_.EpochEnd(epochs_done_ + 1))) {
    absl::Status st =
        EndEpoch(static_cast<int>(epochs_done_ + 1), job_step, test_accuracy, &accuracy);
    if (!st.ok()) return st;
  }
  const int epoch = static_cast<int>(std::min(epochs_done_ + 1, plan_.epochs()));
  if (due || last) Progress(step + 1, epoch, comm, compute, job_step);
  return absl::OkStatus();
}

absl::Status StepReports::EndEpoch(
    int epoch, int64_t job_step,
    const std::function<absl::StatusOr<double>()>& test_accuracy,
    std::optional<double>* accuracy) {
  EpochReport e;
  e.job_id = job_.job_id;
  e.rank = job_.rank;
  e.epoch = epoch;
  // A second epoch ended at the same step has no steps of its own.
  e.train_loss = epoch_steps_ > 0 ? epoch_loss_ / epoch_steps_ : last_loss_;
  e.test_accuracy = -1;
  e.job_step = job_step;
  if (job_.rank == 0 && options_.evaluate) {
    if (!accuracy->has_value()) {
      const absl::Time t = options_.env->Now();
      absl::StatusOr<double> acc = test_accuracy();
      eval_seconds_ += absl::ToDoubleSeconds(options_.env->Now() - t);
      if (!acc.ok()) return acc.status();
      *accuracy = *acc;
    }
    e.test_accuracy = **accuracy;
  }
  const absl::Time now = options_.env->Now();
  e.seconds = absl::ToDoubleSeconds(now - epoch_start_);
  epoch_start_ = now;
  spdlog::info("{}epoch {} done: mean loss {:.4f}{}{}", JobTag(job_.job_id, job_.rank),
               e.epoch, e.train_loss,
               job_.rank == 0 ? absl::StrCat(", test accuracy ", e.test_accuracy) : "",
               job_step > 0 ? absl::StrCat(" (at job step ", job_step, ")") : "");
  reporter_->EpochDone(e);
  epoch_loss_ = 0;
  epoch_steps_ = 0;
  ++epochs_done_;
  return absl::OkStatus();
}

absl::StatusOr<MlpSpec> ModelOf(const JobOptions& job) {
  if (job.layer_widths.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat("model: assignment of ", job.job_id,
                                                   " carries ", job.layer_widths.size(),
                                                   " layer widths (need at least 2)"));
  }
  MlpSpec spec{job.layer_widths};
  for (int w : spec.widths) {
    if (w < 1 || w > kMaxModelWidth) {
      return absl::InvalidArgumentError(
          absl::StrCat("model: layer width ", w, " outside [1, ", kMaxModelWidth, "]"));
    }
  }
  if (job.num_params != 0 && job.num_params != NumParams(spec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: assignment says ", job.num_params,
                     " parameters, its layers have ", NumParams(spec)));
  }
  return spec;
}

TrainingOutcome NewOutcome(const JobOptions& job, const std::string& device) {
  TrainingOutcome out;
  out.done.job_id = job.job_id;
  out.done.rank = job.rank;
  out.done.device = device;
  return out;
}

void RecordFailure(const absl::Status& status, TrainingOutcome* out) {
  out->status = status;
  out->done.code = status.code();
  out->done.error = std::string(status.message());
}

absl::Status RecordSuccess(const JobOptions& job, const StepPlan& plan, int64_t steps,
                           const StepReports& reports, const float* params, size_t n,
                           double wall_seconds, const TrainingOptions& options,
                           const std::function<absl::StatusOr<double>()>& test_accuracy,
                           TrainingOutcome* out) {
  JobDoneReport& d = out->done;
  d.code = absl::StatusCode::kOk;
  d.param_checksum = ChecksumHex(params, n);
  d.last_step_loss = reports.last_loss();
  d.samples = steps * plan.batch();
  d.steps = steps;
  d.wall_seconds = wall_seconds;
  d.test_accuracy = -1;
  if (job.rank == 0 && options.evaluate) {
    absl::StatusOr<double> acc = test_accuracy();
    if (!acc.ok()) return acc.status();
    d.test_accuracy = *acc;
  }
  return absl::OkStatus();
}

}  // namespace gradsync
