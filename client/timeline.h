// A job's course as the client watched it: loss and throughput at each
// progress report, test accuracy at each epoch end, on one wall clock. Goes
// into the results JSON ("timeline", docs/user-guide.md "Results format") so that loss and
// accuracy can be plotted against time (bench/experiments/experiment.py train).
#ifndef GRADSYNC_CLIENT_TIMELINE_H_
#define GRADSYNC_CLIENT_TIMELINE_H_

#include <nlohmann/json.hpp>

#include "absl/time/time.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

class JobTimeline {
 public:
  // Records `ev` as received at `now`. Time zero is the first event that
  // shows the job RUNNING (events before it, e.g. QUEUED, record nothing),
  // so queueing and process start-up are not counted.
  void Add(const v1::JobEvent& ev, absl::Time now);

  // {"progress": [{"t", "step", "epoch", "loss", "samples_per_second"}...],
  //  "epochs": [{"t", "epoch", "train_loss", "test_accuracy"}...]};
  // t in seconds since time zero. Progress points keep arrival order and
  // skip repeats of a step already recorded.
  nlohmann::json ToJson() const;

  bool empty() const { return progress_.empty() && epochs_.empty(); }

 private:
  bool started_ = false;
  absl::Time zero_;
  int64_t last_step_ = -1;
  nlohmann::json progress_ = nlohmann::json::array();
  nlohmann::json epochs_ = nlohmann::json::array();
};

}  // namespace gradsync

#endif  // GRADSYNC_CLIENT_TIMELINE_H_
