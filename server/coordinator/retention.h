// What the coordinator keeps of ended jobs, and for how long (JobRetention,
// docs/operations.md "Limits"): the ended jobs in memory (oldest ended go
// first), EPOCH and STALL events per job, the timelines of the newest
// traced jobs, the curves of the newest ended jobs, and the history's
// limit. Queued and running jobs are never pruned. Not thread-safe (the
// table's caller serialises).
#ifndef GRADSYNC_SERVER_COORDINATOR_RETENTION_H_
#define GRADSYNC_SERVER_COORDINATOR_RETENTION_H_

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "common/message_limits.h"
#include "gradsync/v1/gradsync.pb.h"
#include "server/coordinator/job_entry.h"
#include "server/coordinator/job_history.h"

namespace gradsync {

// The limits (server flags --max_ended_jobs, --max_events_per_job,
// --max_stored_jobs).
struct JobRetention {
  // Ended jobs kept in memory (GetJob, ListJobs, WatchJob); beyond it the
  // job that ended first is forgotten (NOT_FOUND from then on). At least 1.
  size_t max_ended_jobs = 1000;
  // EPOCH and STALL events kept per job for WatchJob; later ones are not
  // recorded (the job's result.epochs and stalls still carry them). STATE
  // events are always kept.
  size_t max_events_per_job = 10000;
  // Ended jobs kept in the job history (--state_dir), oldest submitted go
  // first; 0 = unlimited.
  size_t max_stored_jobs = 10000;
};

class Retention {
 public:
  static constexpr int kMaxTraceEventsPerRank = 200000;
  // Ended jobs whose curves (job_curves.h) are kept, newest first; older
  // ended jobs keep their epochs (result.epochs) only.
  static constexpr size_t kMaxCurveJobs = 64;
  static constexpr size_t kMaxTracedJobs = 4;
  // Every rank's trace together, so that GetJob of a traced job stays below
  // the message limit with room for the rest of the Job.
  static constexpr size_t kMaxTraceBytesPerJob = size_t{32} << 20;
  static_assert(kMaxTraceBytesPerJob + (size_t{8} << 20) <=
                    static_cast<size_t>(kMaxControlMessageBytes),
                "a traced job must fit in one control message");

  // `jobs` (the table's) and `history` outlive the retention.
  Retention(JobRetention limits, JobEntries* jobs, JobHistory* history)
      : limits_(limits), jobs_(jobs), history_(history) {}

  // True when `e` may record another EPOCH or STALL event (counts the
  // refused one otherwise, and warns at the first).
  bool RoomForEvent(JobEntry* e);

  // Job `id` has just ended: it joins the ended jobs, the curves of the one
  // that falls out of the newest kMaxCurveJobs are freed, and the history
  // is due for pruning.
  void Ended(const std::string& id);
  // Job `id` came back ended from the history (nothing to free or prune).
  void Restored(const std::string& id) { ended_.push_back(id); }

  // spec.trace: moves each rank's timeline from its JobDone into the result
  // (at most kMaxTraceEventsPerRank events per rank and kMaxTraceBytesPerJob
  // / ranks bytes, the rest counted as dropped), adds `coordinator_lane`
  // unless it is null (an elastic job's generations), and clears the
  // timelines of older jobs so that at most kMaxTracedJobs keep theirs.
  void KeepTraces(JobEntry* e, const v1::WorkerTrace* coordinator_lane);

  // Forgets the ended jobs beyond max_ended_jobs (the one that ended first
  // goes first; removed from the entries and from `order`) and prunes the
  // history to max_stored_jobs. Call when no JobEntry* is held.
  void PruneEnded(std::vector<std::string>* order);

  // The ended jobs in memory, in the order they ended.
  const std::deque<std::string>& ended() const { return ended_; }

 private:
  const JobRetention limits_;
  JobEntries* const jobs_;
  JobHistory* const history_;
  std::deque<std::string> ended_;   // ended jobs in memory, in end order
  std::deque<std::string> traced_;  // jobs holding traces, oldest first
  bool history_needs_pruning_ = true;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_RETENTION_H_
