// The worker's job half: it starts, runs, cancels and reports the jobs the
// coordinator assigns (training and bench jobs), one at a time, each on a
// job thread of its own. The session half (Peer servers, the coordinator
// stream, heartbeats) is WorkerDaemon (worker_daemon.h), which owns one
// JobRunner and hands it the session's messages.
//
// Threads: Start, Cancel and Stop come from the session thread (Stop also
// from a signal handler's thread); the job thread trains, and its training
// loop runs communication threads of its own (worker/train/comm_pipeline.h).
// Reports go out through the writer the daemon gives, from the job thread
// or from whichever thread waited (stall reports, worker/sync/stall_watch.h).
#ifndef GRADSYNC_WORKER_JOB_RUNNER_H_
#define GRADSYNC_WORKER_JOB_RUNNER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/content_store.h"
#include "common/env.h"
#include "common/spec/job_options.h"
#include "common/spec/tuning_table.h"
#include "gradsync/v1/gradsync.pb.h"
#include "worker/collectives/transport/grpc/grpc_transport.h"
#include "worker/data_cache.h"
#include "worker/metrics/metered_transport.h"
#include "worker/metrics/worker_metrics.h"
#include "worker/model/data_dirs.h"
#include "worker/model/dataset.h"
#include "worker/model/device_model.h"
#include "worker/sync/gradient_sync.h"
#include "worker/sync/stall_transport.h"
#include "worker/sync/stall_watch.h"
#include "worker/train/trainer.h"
#include "worker/worker_options.h"

namespace gradsync {

class BenchRunner;

// What a JobRunner works with; everything it points to outlives it.
struct JobRunnerContext {
  const WorkerOptions* options = nullptr;
  std::string worker_id;  // named in errors and logs
  WorkerMetrics* metrics = nullptr;
  // The Peer servers' mailboxes: a job's are opened when it is assigned and
  // closed when it ends, so that its peers' streams are admitted only then.
  PeerMailboxes* mailboxes = nullptr;
  // Sends a message to the coordinator; false when no session is open (the
  // report is then lost, as the coordinator that wanted it is gone).
  std::function<bool(const v1::WorkerMessage&)> write;
  // A job told to end is still running options.runaway_grace later (it is
  // logged; no JobDone is sent, the worker is not free): the daemon
  // restarts itself, or exits when `stopping`. Null: the worker stays busy.
  std::function<void(bool stopping)> on_runaway;
};

class JobRunner {
 public:
  explicit JobRunner(JobRunnerContext context);
  // Stops the running job and joins its thread.
  ~JobRunner();

  // Runs assignment `a` on a new job thread; a worker that is busy or
  // stopped answers at once with a failed JobDone instead.
  void Start(const v1::Assignment& a) ABSL_LOCKS_EXCLUDED(mu_);
  // The coordinator cancelled `job_id`: the running job, if it is that one,
  // ends CANCELLED with `reason`.
  void Cancel(const std::string& job_id, const std::string& reason)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The running job, if any, cannot go on (the session to the coordinator
  // was lost): it ends with `status`.
  void AbortRunning(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // The worker is stopping: the running job ends and no new one starts.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until the job thread, if one ran, has finished.
  void Join();

 private:
  class Reporter;

  // The job thread's body: Run, with any exception it throws turned into a
  // failed JobDone (std::bad_alloc: RESOURCE_EXHAUSTED, anything else:
  // INTERNAL, each naming the rank and this worker), so that none escapes
  // the thread and the worker stays up for the next job.
  void GuardedRun(const v1::Assignment& a);
  void Run(v1::Assignment a);
  // A rank whose peer was cancelled first sees that peer's streams break
  // (UNAVAILABLE or ABORTED) just before the coordinator's cancel reaches
  // it. After such a failure, waits up to kCancelAfterPeerFailureWait for
  // that cancel and, when it comes, reports the job as CANCELLED (naming
  // the peer failure) instead of failed.
  void ClassifyCancelledPeerFailure(TrainingOutcome* outcome) ABSL_LOCKS_EXCLUDED(mu_);
  static constexpr absl::Duration kCancelAfterPeerFailureWait = absl::Milliseconds(300);
  // A bench job (kind = bench) on this rank: transport, BenchRunner, the
  // JobDone that reports it. No model or dataset is loaded.
  v1::WorkerMessage::JobDone RunBench(const v1::Assignment& a);
  // Marks this worker idle, then sends `done` to the coordinator.
  void ReportJobDone(const v1::WorkerMessage::JobDone& done) ABSL_LOCKS_EXCLUDED(mu_);
  // Aborts the running job's communication with `status` (training sync or
  // bench runner), if any.
  void AbortJobLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a job runs on; members are destroyed in reverse order (sync, then
  // transport, then model).
  struct JobParts {
    std::shared_ptr<const TuningTable> tuning;  // JobTuning; outlives `sync`
    std::shared_ptr<const Dataset> train, test;
    std::unique_ptr<DeviceModel> model;
    std::unique_ptr<StallWatch> stall;          // reports long waits
    std::unique_ptr<GrpcTransport> transport;   // allreduce strategies only
    std::unique_ptr<MeteredTransport> metered;  // counts `transport`'s bytes
    std::unique_ptr<StallTransport> watched;    // reports `metered`'s stalls
    std::unique_ptr<GradientSync> sync;         // a MeteredSync
  };
  // The stall watch of assignment `a`: its reports are logged, counted and
  // sent to the coordinator (WorkerMessage.Stall) from the waiting thread.
  std::unique_ptr<StallWatch> MakeStallWatch(const v1::Assignment& a);
  void ReportStall(const std::string& job_id, int rank, const StallReport& r);
  // The table that ALGORITHM_AUTO chooses by in job `a`: the job's own
  // (JobSpec.tuning_table), else options.tuning (null: the built-in one).
  absl::StatusOr<std::shared_ptr<const TuningTable>> JobTuning(
      const v1::Assignment& a) const;
  // Data, device model, transport and GradientSync for assignment `a`.
  // `job` (JobOptionsOf(a)) must outlive the parts.
  absl::StatusOr<JobParts> Prepare(const v1::Assignment& a, const JobOptions* job);
  absl::StatusOr<std::unique_ptr<DeviceModel>> MakeDevice(const JobOptions& job,
                                                          const Dataset& train);
  // OK unless the helper process (options.helper_binary) fails to read the
  // file `arg` names (worker/torch_file_check.h).
  absl::Status CheckInHelper(const std::string& arg);
  // Blob `sha256` (a TorchScript model or a tensor data file), fetched into
  // the cache (options.cache_dir) unless it is there.
  absl::StatusOr<std::string> FetchBlobOfJob(const std::string& sha256)
      ABSL_LOCKS_EXCLUDED(cache_mu_);
  // The job's tensors: data set (job.data_sha256), fetched and read once
  // per worker (kept in data_cache_ like Fashion-MNIST).
  absl::Status LoadTensorData(const JobOptions& job,
                              std::shared_ptr<const Dataset>* train,
                              std::shared_ptr<const Dataset>* test)
      ABSL_LOCKS_EXCLUDED(mu_);
  // tensors-on-workers: data: job.data_path when its SHA-256 is the job's,
  // else NOT_FOUND or FAILED_PRECONDITION naming the rank, path and hashes.
  absl::StatusOr<std::string> CheckWorkerDataFile(const JobOptions& job);
  absl::StatusOr<std::shared_ptr<const Dataset>> LoadData(const std::string& dir,
                                                          bool train)
      ABSL_LOCKS_EXCLUDED(mu_);
  bool Write(const v1::WorkerMessage& m) { return context_.write(m); }
  // The watchdog thread: once the running job has been told to end
  // (stop_asked_), waits options.runaway_grace for its thread to report;
  // if it has not, logs the runaway and calls context.on_runaway.
  void Watch() ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the running job told to end now, with `why` (for the watchdog).
  void AskToEndLocked(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WatchdogHasWork() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return closing_ || (!job_id_.empty() && stop_asked_ != absl::InfiniteFuture());
  }
  bool WatchedJobEnded() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return closing_ || job_id_ != watched_job_;
  }

  const JobRunnerContext context_;
  const WorkerOptions& options_;   // *context_.options
  const Env* const env_;           // options_.env
  const DataDirPolicy data_dirs_;  // from options_
  WorkerMetrics& metrics_;         // *context_.metrics (thread-safe handles)
  PeerMailboxes& mailboxes_;       // *context_.mailboxes
  const std::string& id_;          // context_.worker_id

  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::string job_id_ ABSL_GUARDED_BY(mu_);  // running job, or empty
  GradientSync* sync_ ABSL_GUARDED_BY(mu_) = nullptr;
  BenchRunner* bench_ ABSL_GUARDED_BY(mu_) = nullptr;  // bench jobs
  std::atomic<bool> cancelled_{false};
  // The coordinator cancelled the running job (Cancel), as opposed to the
  // worker stopping or losing the coordinator.
  bool cancel_requested_ ABSL_GUARDED_BY(mu_) = false;
  int rank_ ABSL_GUARDED_BY(mu_) = 0;  // the running job's
  // When the running job was told to end, and why; InfiniteFuture: it was
  // not.
  absl::Time stop_asked_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Status stop_reason_ ABSL_GUARDED_BY(mu_);
  std::string watched_job_ ABSL_GUARDED_BY(mu_);  // the watchdog's
  bool closing_ ABSL_GUARDED_BY(mu_) = false;     // the watchdog ends
  // Started and joined by the session thread only (Start, Join).
  std::thread thread_;
  std::thread watchdog_;  // Watch; joined by the destructor
  DataCache data_cache_;  // within options_.data_cache_bytes
  absl::Mutex cache_mu_;
  std::unique_ptr<ContentStore> blob_cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_JOB_RUNNER_H_
