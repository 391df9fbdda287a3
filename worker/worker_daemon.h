// worker/: the worker daemon and its main; the layers it is built from live
// in collectives/, model/, sync/ and train/.
//
// The worker daemon: serves Peer, keeps a session with the coordinator
// (register, heartbeats, reports), runs one assigned job at a time.
//
// Threads: the session thread (Run) reads coordinator messages (from a
// callback-API stream, worker/session_stream.h); a heartbeat thread writes
// heartbeats; a job thread trains (and runs the training loop's
// communication threads, worker/train/comm_pipeline.h). Writes to the session
// stream are serialised by write_mu_; stall reports (worker/sync/
// stall_watch.h) are written from whichever thread waited.
#ifndef GRADSYNC_WORKER_WORKER_DAEMON_H_
#define GRADSYNC_WORKER_WORKER_DAEMON_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/content_store.h"
#include "common/env.h"
#include "common/spec/tuning_table.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "worker/collectives/transport/grpc/grpc_transport.h"
#include "worker/metrics/metered_transport.h"
#include "worker/metrics/worker_metrics.h"
#include "worker/model/data_dirs.h"
#include "worker/model/dataset.h"
#include "worker/model/device_model.h"
#include "worker/session_stream.h"
#include "worker/sync/gradient_sync.h"
#include "worker/sync/stall_transport.h"
#include "worker/sync/stall_watch.h"
#include "worker/train/trainer.h"

namespace gradsync {

class BenchRunner;

struct WorkerOptions {
  std::string coordinator;  // HOST:PORT
  std::string listen = "0.0.0.0:0";
  std::string advertise;  // default: listen host (0.0.0.0 -> 127.0.0.1);
                          // "auto": hostname:bound port
  // Port of the bulk Peer server (common/grpc/grpc_util.h "Bulk
  // connections") on the listen host, advertised with the advertised host;
  // 0: a free one; -1: none (peers send large collectives to `listen` too).
  int bulk_port = 0;
  std::string id;  // default: hostname-pid
  // Data directories (worker/model/data_dirs.h): `data_dir` is read by jobs
  // that name none ("" = kDefaultFashionMnistDir); a job naming one must
  // name `data_dir`, one of `allowed_data_dirs`, or a directory below them.
  std::string data_dir;
  std::vector<std::string> allowed_data_dirs;
  // Where fetched TorchScript models are kept by hash (worker/blob_fetch.h);
  // created at the first job that needs it.
  std::string cache_dir = "/tmp/gradsync-worker-cache";
  // The longest a model fetch may take.
  absl::Duration fetch_timeout = absl::Minutes(5);
  // The worker binary, run as a helper with a memory limit to read each
  // fetched model and data file first (worker/torch_file_check.h); main sets
  // it to /proc/self/exe. Empty (daemons inside tests): no helper.
  std::string helper_binary;
  // The TorchScript plugin that main set (--torch_plugin), passed on to the
  // helper; empty: the default places (worker/model/plugin_loader.h).
  std::string torch_plugin;
  int num_gpus = 0;  // GPUs this worker offers (0 without CUDA)
  int gpu = -1;      // GPU to use; -1: rank % num_gpus
  // BLAS threads of cpu jobs; 0: CpuComputeThreads(cores, ranks of the job
  // on this host), see worker/model/cpu_threads.h.
  int cpu_threads = 0;
  // What ring jobs with algorithm auto run per bucket (--tuning_file, loaded
  // and checked in main); null: the built-in table.
  std::shared_ptr<const TuningTable> tuning;
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // The daemon's clock and sleeps (heartbeats, session backoff, job
  // timers, and what it builds for jobs: transports, stall watches, the
  // PS client, the training loop's timers); not owned, outlives the daemon.
  // Its deadlines also go to gRPC, so it keeps real time.
  const Env* env = Env::Default();
  // Tests only: called at the start of every job (it may throw, to check
  // that no exception escapes the job thread).
  std::function<void(const v1::Assignment&)> throw_in_job_for_test;
};

class WorkerDaemon {
 public:
  explicit WorkerDaemon(WorkerOptions options);
  ~WorkerDaemon();

  // Starts the Peer server and the bulk one. Returns the advertised peer
  // address.
  absl::StatusOr<std::string> Start();
  // Session loop: joins the coordinator, reconnects when the session breaks,
  // returns after Stop().
  void Run();
  // Thread-safe; makes Run return (cancels a running job).
  void Stop();
  // This daemon's metrics, for its /metrics endpoint (main.cc). Each daemon
  // owns its registry rather than sharing a process-wide one, so that
  // several daemons in one test process keep separate numbers.
  const MetricsRegistry* metrics_registry() const { return &metrics_registry_; }
  // For main() to add process-wide counters (auth refusals) before Start.
  MetricsRegistry* mutable_metrics_registry() { return &metrics_registry_; }

 private:
  class Reporter;
  class Heartbeats;

  // One session; returns when the stream ends.
  absl::Status Session();
  // Dispatches the coordinator's messages until the stream ends.
  void ReadCoordinatorMessages(SessionStream* stream);
  bool Write(const v1::WorkerMessage& m);
  void StartJob(const v1::Assignment& a);
  void CancelJob(const std::string& job_id, const std::string& reason);
  void JobMain(v1::Assignment a);
  // A rank whose peer was cancelled first sees that peer's streams break
  // (UNAVAILABLE or ABORTED) just before the coordinator's cancel reaches
  // it. After such a failure, waits up to kCancelAfterPeerFailureWait for
  // that cancel and, when it comes, reports the job as CANCELLED (naming
  // the peer failure) instead of failed.
  void ClassifyCancelledPeerFailure(TrainingOutcome* outcome) ABSL_LOCKS_EXCLUDED(mu_);
  static constexpr absl::Duration kCancelAfterPeerFailureWait = absl::Milliseconds(300);
  // The job thread's body: JobMain, with any exception it throws turned into
  // a failed JobDone (std::bad_alloc: RESOURCE_EXHAUSTED, anything else:
  // INTERNAL, each naming the rank and this worker), so that none escapes
  // the thread and the worker stays up for the next job.
  void GuardedJobMain(const v1::Assignment& a);
  // A bench job (kind = bench) on this rank: transport, BenchRunner, the
  // JobDone that reports it. No model or dataset is loaded.
  v1::WorkerMessage::JobDone RunBenchJob(const v1::Assignment& a);
  // Marks this worker idle, then sends `done` to the coordinator.
  void ReportJobDone(const v1::WorkerMessage::JobDone& done);
  // Aborts the running job's communication with `status` (training sync or
  // bench runner), if any.
  void AbortJobLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void JoinJobThread();
  // What a job runs on; members are destroyed in reverse order (sync, then
  // transport, then model).
  struct JobParts {
    std::shared_ptr<const TuningTable> tuning;  // JobTuning; outlives `sync`
    std::shared_ptr<const Dataset> train, test;
    std::unique_ptr<DeviceModel> model;
    std::unique_ptr<StallWatch> stall;          // reports long waits
    std::unique_ptr<GrpcTransport> transport;   // ring strategies only
    std::unique_ptr<MeteredTransport> metered;  // counts `transport`'s bytes
    std::unique_ptr<StallTransport> watched;    // reports `metered`'s stalls
    std::unique_ptr<GradientSync> sync;         // a MeteredSync
  };
  // The stall watch of assignment `a`: its reports are logged, counted and
  // sent to the coordinator (WorkerMessage.Stall) from the waiting thread.
  std::unique_ptr<StallWatch> MakeStallWatch(const v1::Assignment& a);
  void ReportStall(const std::string& job_id, int rank, const StallReport& r);
  // The table that ALGORITHM_AUTO chooses by in job `a`: the job's own
  // (JobSpec.tuning_table), else options_.tuning (null: the built-in one).
  absl::StatusOr<std::shared_ptr<const TuningTable>> JobTuning(
      const v1::Assignment& a) const;
  // Data, device model, transport and GradientSync for assignment `a`.
  // `job` (JobOptionsOf(a)) must outlive the parts.
  absl::StatusOr<JobParts> PrepareJob(const v1::Assignment& a, const JobOptions* job);
  absl::StatusOr<std::unique_ptr<DeviceModel>> MakeDevice(const v1::Assignment& a,
                                                          const JobOptions& job,
                                                          const Dataset& train);
  // The local path of the job's TorchScript model, fetched into the cache
  // (options_.cache_dir) unless it is there.
  absl::StatusOr<std::string> FetchModel(const JobOptions& job)
      ABSL_LOCKS_EXCLUDED(cache_mu_);
  // OK unless the helper process (options_.helper_binary) fails to read the
  // file `arg` names (worker/torch_file_check.h).
  absl::Status CheckInHelper(const std::string& arg);
  // Blob `sha256`, fetched into the cache unless it is there.
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
                                                          bool train);

  const WorkerOptions options_;
  const Env* const env_;           // options_.env
  const DataDirPolicy data_dirs_;  // from options_
  MetricsRegistry metrics_registry_;
  WorkerMetrics metrics_{&metrics_registry_};  // thread-safe handles
  std::string advertise_;
  std::string id_;
  PeerMailboxes mailboxes_{env_};
  std::unique_ptr<PeerService> peer_service_;
  std::unique_ptr<grpc::Server> server_;
  std::string bulk_advertise_;  // empty: no bulk server
  std::unique_ptr<PeerService> bulk_peer_service_;
  std::unique_ptr<grpc::Server> bulk_server_;

  absl::Mutex write_mu_;
  SessionStream* stream_ ABSL_GUARDED_BY(write_mu_) = nullptr;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* session_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string job_id_ ABSL_GUARDED_BY(mu_);  // running job, or empty
  GradientSync* sync_ ABSL_GUARDED_BY(mu_) = nullptr;
  BenchRunner* bench_ ABSL_GUARDED_BY(mu_) = nullptr;  // bench jobs
  std::atomic<bool> cancelled_{false};
  // The coordinator cancelled the running job (CancelJob), as opposed to
  // the worker stopping or losing the coordinator.
  bool cancel_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::thread job_thread_;
  std::map<std::string, std::shared_ptr<const Dataset>> data_cache_ ABSL_GUARDED_BY(mu_);
  absl::Mutex cache_mu_;
  std::unique_ptr<ContentStore> blob_cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_WORKER_DAEMON_H_
