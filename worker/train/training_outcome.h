// What the training loop reports and returns, and its options: below both
// trainer.h (the loop) and training_steps.h (its pieces), which use them.
#ifndef GRADSYNC_WORKER_TRAIN_TRAINING_OUTCOME_H_
#define GRADSYNC_WORKER_TRAIN_TRAINING_OUTCOME_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// Receives reports during training; called on the training thread.
class TrainingReporter {
 public:
  virtual ~TrainingReporter() = default;
  virtual void Progress(const v1::WorkerMessage::Progress& p) = 0;
  virtual void EpochDone(const v1::WorkerMessage::EpochDone& e) = 0;
};

struct TrainingOutcome {
  absl::Status status;
  v1::WorkerMessage::JobDone done;  // filled also on error (code, error)
  std::vector<float> params;        // final parameters of this rank
};

struct TrainingOptions {
  absl::Duration progress_interval = absl::Milliseconds(500);
  bool evaluate = true;  // rank 0 evaluates the test set after every epoch
  // The clock of the loop's timers (wall, comm, compute, eval seconds and
  // the progress interval); not owned, outlives the run.
  const Env* env = Env::Default();
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_TRAIN_TRAINING_OUTCOME_H_
