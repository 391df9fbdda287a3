// The coordinator's queue of jobs waiting for workers, and its scheduling
// rule: FIFO with backfill. A queued job that does not fit the idle
// workers lets later jobs that fit start ahead of it, until it has been
// passed kMaxBackfillPasses times or has waited kBackfillReserveAfter;
// from then on it reserves the cluster (nothing behind it starts, and
// workers that become idle wait for it). A job that wants more workers
// than are registered never reserves: it cannot run until more join, and
// must not block anyone. Plain logic on the table's entries, time from an
// Env; not thread-safe (the table's caller serialises).
#ifndef GRADSYNC_SERVER_COORDINATOR_JOB_QUEUE_H_
#define GRADSYNC_SERVER_COORDINATOR_JOB_QUEUE_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/env.h"
#include "server/coordinator/job_entry.h"
#include "server/coordinator/worker_registry.h"

namespace gradsync {

inline constexpr int kMaxBackfillPasses = 16;
inline constexpr absl::Duration kBackfillReserveAfter = absl::Minutes(5);

class JobQueue {
 public:
  // Places job `e` on `picked` (spec.workers idle workers, in rank order).
  using Place = std::function<void(JobEntry* e,
                                   const std::vector<const RegisteredWorker*>& picked)>;

  // `jobs` (the table's), `workers` and `env` outlive the queue.
  JobQueue(JobEntries* jobs, WorkerRegistry* workers, const Env* env)
      : jobs_(jobs), workers_(workers), env_(env) {}

  // Queues job `id` (QUEUED in the entries) behind the others.
  void Push(const std::string& id) { ids_.push_back(id); }

  // One pass over the queue, oldest first:
  //  1. ids that are no longer QUEUED are dropped;
  //  2. a job that fits the idle workers is placed (`place`), and counts as
  //     a pass against the oldest waiting job that could run, the "head";
  //  3. the first job that does not fit but could run on the registered
  //     workers becomes the head; if it reserves, nothing behind it starts.
  void Schedule(const Place& place);

  // True once waiting job `e` may no longer be passed by later ones.
  bool Reserves(const JobEntry& e) const;

  // The queued job ids, oldest first (some may have ended since; Schedule
  // drops them).
  const std::deque<std::string>& ids() const { return ids_; }
  bool empty() const { return ids_.empty(); }
  size_t size() const { return ids_.size(); }

 private:
  JobEntries* const jobs_;
  WorkerRegistry* const workers_;
  const Env* const env_;
  std::deque<std::string> ids_;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_JOB_QUEUE_H_
