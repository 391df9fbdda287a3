// What the coordinator keeps of one job: the Job as clients see it, and the
// bookkeeping behind it (events, per-rank reports, curves, scheduling and
// re-formation state). The job table owns the entries; its parts (the
// queue, the generations, the history, the retention) read and change
// them. Plain data.
#ifndef GRADSYNC_SERVER_COORDINATOR_JOB_ENTRY_H_
#define GRADSYNC_SERVER_COORDINATOR_JOB_ENTRY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/spec/model_spec.h"
#include "gradsync/v1/gradsync.pb.h"
#include "server/coordinator/job_curves.h"
#include "server/coordinator/straggler_watch.h"

namespace gradsync {

struct JobEntry {
  v1::Job job;
  MlpSpec model;                     // parsed once, at submission
  int64_t seq = 0;                   // bumped on every change
  std::vector<v1::JobEvent> events;  // STATE and EPOCH events
  size_t saved_events = 0;           // events[0, saved_events) stored
  v1::JobEvent progress;             // latest PROGRESS event
  int64_t progress_seq = 0;
  std::vector<bool> done;  // per rank: JobDone received
  std::vector<v1::WorkerMessage::JobDone> results;
  std::vector<double> rank_wall;  // per rank training seconds
  std::map<int, std::vector<v1::WorkerMessage::EpochDone>> epochs;
  std::vector<std::string> init_checksums;
  std::vector<double> rank_samples_per_second;
  absl::Time started;
  absl::Time queued;        // submission, on the table's Env
  int backfill_passes = 0;  // later jobs started ahead of it (JobQueue)
  // A rank's error that may be a symptom (a peer vanished): held for
  // kSymptomGrace so that a lost worker, the likely cause, is reported.
  absl::Status pending_error;
  absl::Time pending_since;
  // The worker and rank pending_error blames (BlamedPeerRank of its text,
  // common/spec/peer_blame.h); empty / -1 when it names no peer.
  std::string pending_blamed_worker;
  int pending_blamed_rank = -1;
  // Elastic jobs: workers a failed generation blamed while they were alive,
  // with the registration (RegisteredWorker::order) that was blamed; later
  // generations leave them out while that registration lasts and enough
  // other workers are idle (they may come back once they register again).
  std::map<std::string, int64_t> left_out;
  std::map<int, std::string> stalls;  // rank -> its latest stall report
  int64_t dropped_events = 0;         // beyond max_events_per_job
  JobCurves curves;                   // bounded: kCurvePoints per series
  StragglerWatch stragglers;          // names a rank that computes slowest
  // Elastic jobs: the generation ended and the next is not placed yet
  // (the job stays RUNNING; waiting_for says what it waits for).
  bool reforming = false;
  absl::Time reform_since;  // the last generation's end
};

// Every job the table knows, by id.
using JobEntries = std::map<std::string, JobEntry>;

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_JOB_ENTRY_H_
