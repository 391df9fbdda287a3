// What the training loop reports and returns, and its options: below both
// trainer.h (the loop) and training_steps.h (its pieces), which use them.
// Plain structs; the worker daemon turns them into its wire messages
// (worker/job_reports.h).
#ifndef GRADSYNC_WORKER_TRAIN_TRAINING_OUTCOME_H_
#define GRADSYNC_WORKER_TRAIN_TRAINING_OUTCOME_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/trace/trace.h"

namespace gradsync {

// Progress of one rank (cumulative since the job started).
struct ProgressReport {
  std::string job_id;
  int rank = 0;
  int64_t step = 0;  // steps completed (by this rank)
  int64_t total_steps = 0;
  int64_t job_step = 0;  // job-wide steps (JobOptions::job_wide_steps): the job's
  int epoch = 1;         // current epoch, 1-based
  double loss = 0;       // mean over the steps since the last report
  double samples_per_second = 0;  // this rank, since the last report
  double comm_seconds = 0;
  double compute_seconds = 0;
  std::string init_checksum;  // set once: the first report's
};

// The end of an epoch on one rank.
struct EpochReport {
  std::string job_id;
  int rank = 0;
  int epoch = 1;
  double train_loss = 0;      // mean over the epoch's steps
  double test_accuracy = -1;  // rank 0 evaluating; -1 otherwise
  double seconds = 0;
  int64_t job_step = 0;  // job-wide steps: the job's step test_accuracy is at
};

// One rank's timeline (spec.trace): the recorder's events and how many it
// dropped.
struct RankTrace {
  int rank = 0;
  int64_t dropped = 0;
  std::vector<TraceEvent> events;
};

// How one rank's run ended.
struct JobDoneReport {
  std::string job_id;
  int rank = 0;
  std::string device;
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string error;
  std::string param_checksum;
  double last_step_loss = 0;
  int64_t samples = 0;
  int64_t steps = 0;
  double test_accuracy = -1;  // rank 0 evaluating: on the final parameters
  double wall_seconds = 0;
  double comm_seconds = 0;
  double exposed_comm_seconds = 0;
  double compute_seconds = 0;
  std::vector<int64_t> bucket_bytes;           // gradient buckets, sync order
  std::vector<std::string> bucket_algorithms;  // allreduce jobs, per bucket
  std::optional<RankTrace> trace;              // spec.trace, a successful run
};

// Receives reports during training; called on the training thread.
class TrainingReporter {
 public:
  virtual ~TrainingReporter() = default;
  virtual void Progress(const ProgressReport& p) = 0;
  virtual void EpochDone(const EpochReport& e) = 0;
};

struct TrainingOutcome {
  absl::Status status;
  JobDoneReport done;         // filled also on error (code, error)
  std::vector<float> params;  // final parameters of this rank
};

struct TrainingOptions {
  absl::Duration progress_interval = absl::Milliseconds(500);
  bool evaluate = true;  // rank 0 evaluates the test set after every epoch
  // A straggler on demand (worker --compute_slowdown): after each step's
  // forward/backward the loop sleeps (F - 1) x its duration. 1 = off.
  double compute_slowdown = 1.0;
  // The clock of the loop's timers (wall, comm, compute, eval seconds and
  // the progress interval); not owned, outlives the run.
  const Env* env = Env::Default();
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_TRAIN_TRAINING_OUTCOME_H_
