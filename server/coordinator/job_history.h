// The job table's history: what it saves of each job to the JobStore
// (job_store.h; SQLite in the server) and reads back after a restart. A
// job and its events not saved yet go in one transaction; timelines stay
// out (they can be megabytes). Without a store (memory only) saving just
// marks the events saved. Not thread-safe (the table's caller serialises).
#ifndef GRADSYNC_SERVER_COORDINATOR_JOB_HISTORY_H_
#define GRADSYNC_SERVER_COORDINATOR_JOB_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/coordinator/job_entry.h"
#include "server/coordinator/job_store.h"

namespace gradsync {

class JobHistory {
 public:
  // `store` (not owned, may be null) outlives the history.
  explicit JobHistory(JobStore* store) : store_(store) {}

  bool enabled() const { return store_ != nullptr; }

  // Saves e's job and its events from e->saved_events on, in one
  // transaction, and advances saved_events; the store's error (logged)
  // leaves them unsaved, so that the next save of the job retries them.
  absl::Status Save(JobEntry* e);

  // Every stored job in submission order (empty without a store).
  absl::StatusOr<std::vector<StoredJob>> LoadAll();

  // Keeps the newest `max_stored` ended jobs of the store (0: all); an
  // error is logged.
  void PruneEnded(size_t max_stored);

  // n of a job id "j-<prefix><n>" (the digits after the last '-'); 0 when
  // the id does not end so. Ids continue after the largest stored n.
  static int64_t IdNumber(const std::string& id);

 private:
  JobStore* const store_;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_JOB_HISTORY_H_
