// The data-parallel training loop of one rank. Strategy-agnostic: it talks to
// a GradientSync only.
#ifndef GRADSYNC_WORKER_TRAIN_TRAINER_H_
#define GRADSYNC_WORKER_TRAIN_TRAINER_H_

#include <atomic>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "gradsync/v1/gradsync.pb.h"
#include "worker/model/dataset.h"
#include "worker/sync/gradient_sync.h"

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
};

// Runs the job of `assignment` on this rank:
//  1. params = the model's deterministic init from the job seed;
//  2. sync->Initialize(params) makes them the job's common initial values;
//     their checksum goes into the first Progress report;
//  3. for each step: the rank's shard of the global batch (ShardedSampler),
//     forward/backward, sync->Step; per-epoch EpochDone (rank 0 with test
//     accuracy), Progress every progress_interval;
//  4. sync->Finish(params), final checksum and (rank 0) test accuracy.
// `cancelled` is polled between steps; a cancelled or failed run aborts the
// sync so that peers blocked on us are released.
TrainingOutcome RunTraining(const v1::Assignment& assignment,
                            const Dataset& train, const Dataset& test,
                            GradientSync* sync, TrainingReporter* reporter,
                            const std::atomic<bool>* cancelled,
                            const TrainingOptions& options = {});

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_TRAIN_TRAINER_H_
