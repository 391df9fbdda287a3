// The pieces of the training loop (trainer.cc) that need no device and no
// network: which samples a step trains on, the progress / per-epoch reports,
// and the outcome record.
#ifndef GRADSYNC_WORKER_TRAIN_TRAINING_STEPS_H_
#define GRADSYNC_WORKER_TRAIN_TRAINING_STEPS_H_

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/spec/job_options.h"
#include "common/spec/model_spec.h"
#include "worker/model/dataset.h"
#include "worker/train/training_outcome.h"

namespace gradsync {

// This rank's batches: the sharded sampler over the (possibly limited)
// training set, and the step count (--steps, else epochs x steps per epoch).
class StepPlan {
 public:
  // INVALID_ARGUMENT when one global batch exceeds the training samples.
  static absl::StatusOr<StepPlan> Make(const JobOptions& job, const Dataset& train);

  int64_t total() const { return total_; }
  int64_t steps_per_epoch() const { return spe_; }
  int batch() const { return batch_; }  // this rank's samples per step
  // What this rank's mean gradient is scaled by before it is synchronised:
  // 1 unless an elastic generation splits the global batch unevenly
  // (ShardedSampler); then batch * world / global_batch.
  double gradient_weight() const { return gradient_weight_; }
  // 0-based epoch of `step`.
  int64_t epoch(int64_t step) const { return step / spe_; }
  bool EpochEnds(int64_t step) const {
    return (step + 1) % spe_ == 0 || step + 1 == total_;
  }
  // Epochs of the job (the last may be short, with --steps).
  int64_t epochs() const { return (total_ + spe_ - 1) / spe_; }
  // Steps done when 1-based epoch `k` ends.
  int64_t EpochEnd(int64_t k) const { return std::min(k * spe_, total_); }

  // Copies this rank's samples of `step` into x() / y().
  void Gather(int64_t step);
  const float* x() const { return x_.data(); }
  const uint8_t* y() const { return y_.data(); }

 private:
  StepPlan(const Dataset& train, ShardedSampler sampler, int batch, int64_t total,
           double gradient_weight);

  const Dataset* train_;
  ShardedSampler sampler_;
  int batch_;
  double gradient_weight_;
  int64_t spe_;
  int64_t total_;
  std::vector<int64_t> idx_;
  std::vector<float> x_;
  std::vector<uint8_t> y_;
};

// Progress every interval (and at the end), EpochDone at every epoch end;
// the first Progress carries the initial-parameter checksum.
class StepReports {
 public:
  StepReports(const JobOptions& job, const StepPlan& plan, std::string init_checksum,
              TrainingReporter* reporter, const TrainingOptions& options);

  // Sends the first report: `start_step` steps done (0, or where a resumed
  // job starts).
  void Start(int64_t start_step);

  // Records the loss of finished step `step`; comm / compute are this
  // rank's cumulative seconds so far. At an epoch end, rank 0 asks
  // `test_accuracy` (when evaluation is on) for the EpochDone report.
  //
  // Job-wide steps (`job_pushes` >= 0: GradientSync::JobPushesApplied as
  // it was once `step` was applied): the epochs and the Progress step are
  // the job's, job_pushes / world; an epoch ends on this rank at the first
  // of its steps that sees the job past the epoch's end (several at once
  // when the job crossed several), so rank 0 evaluates the parameters it
  // pulled from the PS then, and says at which job step. `last`: the rank's
  // final step (the job's budget is spent); every epoch not reported yet
  // ends there. With `job_pushes` < 0 (every rank runs every step) epochs
  // end at this rank's own steps and `last` is implied by the plan.
  absl::Status StepDone(int64_t step, float loss, double comm, double compute,
                        const std::function<absl::StatusOr<double>()>& test_accuracy,
                        int64_t job_pushes = -1, bool last = false);

  float last_loss() const { return last_loss_; }
  // Seconds spent in test_accuracy() calls.
  double eval_seconds() const { return eval_seconds_; }

 private:
  void Progress(int64_t steps_done, int epoch, double comm, double compute,
                int64_t job_step = 0);
  // Sends the EpochDone of 1-based `epoch` (job_step: EpochReport's);
  // `accuracy` caches rank 0's evaluation across the epochs of one step.
  absl::Status EndEpoch(int epoch, int64_t job_step,
                        const std::function<absl::StatusOr<double>()>& test_accuracy,
                        std::optional<double>* accuracy);

  const JobOptions& job_;
  const StepPlan& plan_;
  const std::string init_checksum_;
  TrainingReporter* const reporter_;
  const TrainingOptions options_;
  bool sent_checksum_ = false;
  double epoch_loss_ = 0, report_loss_ = 0, eval_seconds_ = 0;
  float last_loss_ = 0;
  int64_t epoch_steps_ = 0, report_steps_ = 0;
  int64_t epochs_done_ = 0;  // job-wide steps: epochs reported
  absl::Time epoch_start_, last_report_;
};

// The model of a job, from the layer widths the coordinator parsed.
// INVALID_ARGUMENT when they are fewer than two, a width is outside
// [1, kMaxModelWidth], or num_params does not match them.
absl::StatusOr<MlpSpec> ModelOf(const JobOptions& job);

// The outcome a run starts from: job, rank and device filled in.
TrainingOutcome NewOutcome(const JobOptions& job, const std::string& device);

// Marks `out` failed with `status`.
void RecordFailure(const absl::Status& status, TrainingOutcome* out);

// Marks `out` succeeded: checksum of params[0..n), last loss, step and sample
// counts (`steps` this rank ran: plan.total(), or its share of job-wide
// steps), wall time, and (rank 0, evaluating) the final test accuracy. The
// caller sets the comm / compute seconds it measured.
absl::Status RecordSuccess(const JobOptions& job, const StepPlan& plan, int64_t steps,
                           const StepReports& reports, const float* params, size_t n,
                           double wall_seconds, const TrainingOptions& options,
                           const std::function<absl::StatusOr<double>()>& test_accuracy,
                           TrainingOutcome* out);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_TRAIN_TRAINING_STEPS_H_
