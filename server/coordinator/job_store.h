// Where the coordinator's job history outlives the process: the JobTable
// writes each job's creation, state transitions and epoch results here, and
// reads everything back at start-up (JobTable::Recover).
//
// The one implementation is SqliteJobStore (sqlite_job_store.h); tests may
// provide their own.
#ifndef GRADSYNC_SERVER_COORDINATOR_JOB_STORE_H_
#define GRADSYNC_SERVER_COORDINATOR_JOB_STORE_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// One job as stored: the Job (spec, state, timestamps, error, workers,
// results with per-epoch figures) and its STATE / EPOCH events in order.
struct StoredJob {
  v1::Job job;
  std::vector<v1::JobEvent> events;
};

// Implementations are thread-safe: any method may be called concurrently.
class JobStore {
 public:
  virtual ~JobStore() = default;

  // Every stored job, in the order in which each was first saved, with its
  // events. DATA_LOSS when a stored record does not parse.
  virtual absl::StatusOr<std::vector<StoredJob>> LoadAll() = 0;

  // In one transaction: inserts `job` or replaces the stored job with its id,
  // and appends `new_events` after the job's stored events. On error nothing
  // of it is stored (the caller may retry with the same events).
  virtual absl::Status Save(const v1::Job& job,
                            absl::Span<const v1::JobEvent> new_events) = 0;

  // Deletes the ended jobs (SUCCEEDED, FAILED, CANCELLED) and their events
  // beyond the newest `keep` ones, oldest first (in first-save order).
  // Queued and running jobs are kept. The default stores keep everything.
  virtual absl::Status PruneEnded(size_t keep) {
    (void)keep;
    return absl::OkStatus();
  }
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_JOB_STORE_H_
