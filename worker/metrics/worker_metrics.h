// worker/metrics: what a worker daemon measures, and the decorators that
// measure it without touching the data path's code: MeteredTransport (bytes
// per peer, around any Transport) and MeteredSync (latency per bucket
// synchronisation, bytes per PS shard, around any GradientSync).
//
// The daemon's metrics: handles into its MetricsRegistry, registered once
// per daemon and shared by all of its jobs (counters accumulate over jobs).
// Every member is non-null; the pointed-to metrics are thread-safe.
#ifndef GRADSYNC_WORKER_METRICS_WORKER_METRICS_H_
#define GRADSYNC_WORKER_METRICS_WORKER_METRICS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/metrics/metrics.h"

namespace gradsync {

struct WorkerMetrics {
  // Registers the gradsync_worker_* families on `registry`, which must
  // outlive this object.
  explicit WorkerMetrics(MetricsRegistry* registry);

  // Training progress (from the training loop's reports).
  Counter* steps;
  Gauge* samples_per_second;
  Counter* comm_seconds;          // communication threads busy, per job
  Counter* exposed_comm_seconds;  // training thread waiting, per job
  CounterFamily* jobs;            // {outcome}: succeeded | cancelled | failed
  // Ring traffic, label peer = the other rank (MeteredTransport).
  CounterFamily* peer_sent_bytes;
  CounterFamily* peer_received_bytes;
  CounterFamily* peer_streams;  // {server}: peer | bulk
  // PS traffic, label shard = the shard index (MeteredSync).
  CounterFamily* ps_sent_bytes;
  CounterFamily* ps_received_bytes;
  // One observation per GradientSync::SyncBucket call (MeteredSync).
  Histogram* collective_seconds;  // ring strategies: one bucket's allreduce
  Histogram* push_pull_seconds;   // ps strategies: one bucket's push and pull
  // Heartbeat intervals in which no heartbeat went out (worker_daemon.cc).
  Counter* heartbeats_missed;
  // Waits reported as stalls (worker/sync/stall_watch.h), once per wait.
  Counter* stalls;

  // Updates steps (by the advance to `step`, the steps completed, since the
  // previous report of the same job; a new job starts from 0) and
  // samples_per_second. Call from one thread (the training thread).
  void OnProgress(int64_t step, double samples_per_second);
  // Adds a finished job's outcome and (training jobs) its times.
  void OnJobDone(absl::StatusCode code, double comm_seconds, double exposed_comm_seconds);

 private:
  int64_t last_step_ = 0;  // of the running job, as last reported
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_METRICS_WORKER_METRICS_H_
