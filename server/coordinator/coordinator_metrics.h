// The coordinator's /metrics: jobs by state, queue length, workers. Values
// are read from the job table and the worker registry when the endpoint is
// scraped (no counting on the coordinator's paths); the counters among them
// are monotonic because the job table keeps every job it was given.
#ifndef GRADSYNC_SERVER_COORDINATOR_COORDINATOR_METRICS_H_
#define GRADSYNC_SERVER_COORDINATOR_COORDINATOR_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/metrics/metrics.h"
#include "gradsync/v1/gradsync.pb.h"
#include "server/coordinator/worker_registry.h"

namespace gradsync {

struct CoordinatorStats {
  std::map<v1::JobState, int64_t> jobs;  // every state but UNSPECIFIED, zeros too
  int64_t jobs_total = 0;                // submitted since start
  // Elastic jobs in the table: generations that ended and were re-formed,
  // and the steps their successors did again.
  int64_t reformations = 0;
  int64_t steps_redone = 0;
  int64_t live_workers = 0;
  int64_t busy_workers = 0;
  // Running jobs of 2+ ranks: job id -> its slowest rank so far
  // (JobResult.slowest_rank while it runs).
  std::map<std::string, v1::SlowestRank> slowest;
};

// Counts `jobs` by state and `live` workers (busy: assigned to a job).
CoordinatorStats CountCoordinatorStats(const std::vector<const v1::Job*>& jobs,
                                       const std::vector<const RegisteredWorker*>& live);

// Registers on `registry`, each computed from `stats()` at every scrape:
//   gradsync_server_jobs{state}                  gauge
//   gradsync_server_queue_length                 gauge (jobs QUEUED)
//   gradsync_server_registered_workers           gauge (live)
//   gradsync_server_busy_workers                 gauge (live, in a job)
//   gradsync_server_jobs_submitted_total         counter
//   gradsync_server_jobs_finished_total{state}   counter (SUCCEEDED, FAILED,
//                                                CANCELLED)
//   gradsync_job_slowest_rank{job}               gauge (running jobs: the
//                                                rank computing slowest)
//   gradsync_job_slowest_rank_ratio{job}         gauge (its compute per step
//                                                / the other ranks' median)
// `stats` runs on the scraping thread and must stay callable for the
// registry's life.
void RegisterCoordinatorMetrics(std::function<CoordinatorStats()> stats,
                                MetricsRegistry* registry);

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_COORDINATOR_METRICS_H_
