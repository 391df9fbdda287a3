// The training loop's and bench jobs' plain reports
// (worker/train/training_outcome.h, worker/bench_job/bench_result.h) as the
// daemon's wire messages to the coordinator.
#ifndef GRADSYNC_WORKER_JOB_REPORTS_H_
#define GRADSYNC_WORKER_JOB_REPORTS_H_

#include "gradsync/v1/gradsync.pb.h"
#include "worker/bench_job/bench_result.h"
#include "worker/train/training_outcome.h"

namespace gradsync {

v1::WorkerMessage::Progress ProgressProto(const ProgressReport& p);
v1::WorkerMessage::EpochDone EpochDoneProto(const EpochReport& e);
v1::WorkerMessage::JobDone JobDoneProto(const JobDoneReport& d);
v1::BenchRankResult BenchRankResultProto(const BenchRankResult& r);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_JOB_REPORTS_H_
