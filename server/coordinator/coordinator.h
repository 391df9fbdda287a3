// server/coordinator/ owns the Coordinator: the worker registry, the job
// table and scheduler, and the gRPC service in front of them.
//
// This header is the gRPC façade (v1::Coordinator::Service): Join sessions,
// WatchJob, Submit / Get / List / Cancel, and the threads. The plain logic it
// calls lives in worker_registry.h (who has joined) and job_table.h (jobs,
// placement, reports, failures, results, events); this class owns the mutex
// that guards both and carries out the Decisions the job table returns.
//
// Threading: gRPC's sync server threads call the RPC methods concurrently;
// each worker's Join stream is served by one thread for the life of the
// session, and each session has a writer thread that alone writes to its
// stream. A monitor thread expires workers whose heartbeats stop, silent
// unregistered streams and held symptom errors; a background thread makes the
// blocking EndJob calls on PS shards. All methods may be called concurrently.
#ifndef GRADSYNC_SERVER_COORDINATOR_COORDINATOR_H_
#define GRADSYNC_SERVER_COORDINATOR_COORDINATOR_H_

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/content_store.h"
#include "common/env.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "server/coordinator/coordinator_metrics.h"
#include "server/coordinator/dashboard_server.h"
#include "server/coordinator/job_store.h"
#include "server/coordinator/job_table.h"
#include "server/coordinator/worker_registry.h"

namespace gradsync {

struct CoordinatorOptions {
  // PS shard addresses in shard order; a job with ps_shards = S uses the
  // first S. Empty: the coordinator cannot run PS jobs.
  std::vector<std::string> ps_addresses;
  // A worker silent for this long is declared dead.
  absl::Duration heartbeat_timeout = absl::Seconds(6);
  // A Join stream that has not registered after this long is closed.
  absl::Duration register_timeout = absl::Seconds(10);
  // The job history (job_store.h); nullptr keeps jobs in memory only. Not
  // owned; must outlive the coordinator.
  JobStore* store = nullptr;
  // What is kept of ended jobs (job_table.h).
  JobRetention retention;
  // A dead worker stays listed this long after it was last heard from.
  absl::Duration dead_worker_grace = absl::Minutes(10);
  // Join and WatchJob streams open at once (each holds a handler thread, a
  // Join also a writer thread); beyond it a new one gets RESOURCE_EXHAUSTED.
  int max_streams = 1024;
  // Job secrets are derived from it (common/grpc/job_secret.h); the PS shards
  // hold the same key. Null: a key of this coordinator's own.
  std::shared_ptr<const JobKey> job_key;
  // Uploaded blobs (TorchScript models), by hash; null: PutBlob and GetBlob
  // answer FAILED_PRECONDITION and no job may name one. Not owned.
  ContentStore* blobs = nullptr;
  // The largest blob PutBlob accepts (--max_blob_bytes).
  uint64_t max_blob_bytes = 512ull << 20;
  // The largest tensor data file (BlobChunk.kind "data"; --max_data_bytes).
  uint64_t max_data_bytes = 4ull << 30;
  // All blobs kept together, at most (--max_blobs_total_bytes), and the
  // disk space an upload must leave free beside them, for the job history
  // and checkpoints under the same --state_dir (--blob_disk_reserve_bytes).
  uint64_t max_blobs_total_bytes = 16ull << 30;
  uint64_t blob_disk_reserve_bytes = 1ull << 30;
  // PutBlob and GetBlob streams open at once, in slots of their own, so that
  // uploads cannot keep workers from joining (--max_blob_streams).
  int max_blob_streams = 16;
  // A PutBlob stream that sends nothing for this long is cancelled.
  absl::Duration blob_idle_timeout = absl::Seconds(30);
};

class Coordinator final : public v1::Coordinator::Service, public DashboardSource {
 public:
  // `env` must outlive the coordinator; it times heartbeats and jobs (the
  // threads' own waits use real time).
  explicit Coordinator(CoordinatorOptions options, const Env* env = Env::Default());
  ~Coordinator() override;

  grpc::Status SubmitJob(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req,
                         v1::Job* resp) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                      v1::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override;
  grpc::Status CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* req,
                         v1::Job* resp) override;
  grpc::Status WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  // A worker's session:
  //   1. wait up to options.register_timeout (the monitor enforces it) for Register;
  //   2. register the worker, start the session's writer thread, schedule;
  //   3. handle its messages until the stream ends or the worker is dead or
  //      replaced by a newer session with the same id;
  //   4. report the worker lost (if this is still its session), close the
  //      channel, cancel the stream and join the writer.
  grpc::Status Join(grpc::ServerContext* ctx,
                    grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>*
                        stream) override;
  // Blobs (coordinator_blobs.cc): each holds one of the --max_streams slots
  // while it streams.
  grpc::Status PutBlob(grpc::ServerContext* ctx,
                       grpc::ServerReader<v1::BlobChunk>* reader,
                       v1::BlobInfo* resp) override;
  grpc::Status GetBlob(grpc::ServerContext* ctx, const v1::GetBlobRequest* req,
                       grpc::ServerWriter<v1::BlobChunk>* writer) override;

  // Loads the job history from options.store (JobTable::Recover: RUNNING
  // jobs fail with "coordinator restarted", QUEUED ones wait for workers).
  // Call once, before the server serves. The store's error when it cannot
  // be read.
  absl::Status RecoverJobs() ABSL_LOCKS_EXCLUDED(mu_);

  // Sets shard 0's address once the server knows its port (role=all).
  void SetShardZeroAddress(const std::string& address);

  // Ends watchers and worker sessions; call before Server::Shutdown.
  void Shutdown();

  // Jobs by state and workers, for /metrics (coordinator_metrics.h).
  CoordinatorStats Stats() ABSL_LOCKS_EXCLUDED(mu_);

  // The dashboard's reads (dashboard_server.h; coordinator_dashboard.cc):
  // copies taken under mu_, traces left out.
  ClusterLive DashboardOverview(size_t max_ended) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<JobLive> DashboardJob(const std::string& id) override
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Stream = grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>;

  // A worker's stream as seen by writers on other threads.
  //
  // Messages are queued in order while the coordinator's mu_ is held (Post)
  // and written by the session's own writer thread, so a worker sees them in
  // the order the coordinator decided them and no shared thread ever blocks
  // on one worker's stream.
  struct WriteChannel {
    // The writer thread waits for this.
    bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return closed || !queue.empty();
    }

    Stream* stream = nullptr;  // constant; used by the writer thread only
    absl::Mutex mu;
    std::deque<v1::CoordinatorMessage> queue ABSL_GUARDED_BY(mu);
    bool closed ABSL_GUARDED_BY(mu) = false;
  };

  // The live Join handler of a registered worker id.
  struct Session {
    grpc::ServerContext* ctx = nullptr;
    std::shared_ptr<WriteChannel> chan;
  };

  // Queues a message for a worker's writer thread (call under mu_, so that
  // queue order is decision order). No-op for a closed or null channel.
  static void Post(const std::shared_ptr<WriteChannel>& chan, v1::CoordinatorMessage msg);
  // The writer thread of one worker session.
  static void WriterLoop(std::shared_ptr<WriteChannel> chan);
  // A live worker as ListJobs and the dashboard show it.
  static v1::WorkerInfo WorkerInfoOf(const RegisteredWorker& w);
  // ParameterServer.EndJob on each shard; blocking (background thread only).
  static void EndJobOnShards(const ShardEndJob& end);

  // The RPC bodies. Each public RPC runs its body under GuardRpc
  // (coordinator_guard.cc): an exception answers INTERNAL (out of memory:
  // RESOURCE_EXHAUSTED) naming the RPC, and never escapes the handler.
  grpc::Status SubmitJobUnguarded(grpc::ServerContext* ctx,
                                  const v1::SubmitJobRequest* req, v1::Job* resp);
  grpc::Status GetJobUnguarded(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                               v1::Job* resp);
  grpc::Status ListJobsUnguarded(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                                 v1::ListJobsResponse* resp);
  grpc::Status CancelJobUnguarded(grpc::ServerContext* ctx,
                                  const v1::CancelJobRequest* req, v1::Job* resp);
  grpc::Status WatchJobUnguarded(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                                 grpc::ServerWriter<v1::JobEvent>* writer);
  grpc::Status JoinUnguarded(grpc::ServerContext* ctx, Stream* stream);
  grpc::Status PutBlobUnguarded(grpc::ServerContext* ctx,
                                grpc::ServerReader<v1::BlobChunk>* reader,
                                v1::BlobInfo* resp);
  grpc::Status GetBlobUnguarded(grpc::ServerContext* ctx, const v1::GetBlobRequest* req,
                                grpc::ServerWriter<v1::BlobChunk>* writer);
  // OK unless `spec` names a TorchScript model this coordinator was not
  // given (FAILED_PRECONDITION).
  grpc::Status CheckUploaded(const v1::JobSpec& spec) const;
  // Stream slots of one kind: Join and WatchJob (options_.max_streams), or
  // PutBlob and GetBlob (options_.max_blob_streams).
  struct StreamSlots {
    int open = 0;
    int limit = 0;
    const char* streams = "";  // what they count, for the message
    const char* flag = "";     // the server flag that sets `limit`
  };
  // Takes one of `slots`; RESOURCE_EXHAUSTED naming `rpc`, the streams and
  // the flag when none is free. A taken slot is given back with Release.
  grpc::Status Acquire(StreamSlots* slots, const char* rpc) ABSL_LOCKS_EXCLUDED(mu_);
  void Release(StreamSlots* slots) ABSL_LOCKS_EXCLUDED(mu_);
  // An upload's last chunk was read now (the monitor cancels those idle for
  // options_.blob_idle_timeout); Forget when it ends.
  void UploadActive(grpc::ServerContext* ctx) ABSL_LOCKS_EXCLUDED(mu_);
  void UploadEnded(grpc::ServerContext* ctx) ABSL_LOCKS_EXCLUDED(mu_);

  // Join's steps (see Join).
  grpc::Status AwaitRegister(grpc::ServerContext* ctx, Stream* stream,
                             v1::WorkerMessage* first) ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status OpenSession(grpc::ServerContext* ctx,
                           const v1::WorkerMessage::Register& reg,
                           const std::shared_ptr<WriteChannel>& chan)
      ABSL_LOCKS_EXCLUDED(mu_);
  void ServeSession(grpc::ServerContext* ctx, const std::string& id, Stream* stream)
      ABSL_LOCKS_EXCLUDED(mu_);
  void CloseSession(grpc::ServerContext* ctx, const std::string& id)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Handles one message of worker `id`'s current session.
  void HandleMessage(const std::string& id, const v1::WorkerMessage& m)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Carries out the job table's decisions: posts messages to sessions in
  // order, queues EndJob calls for the background thread, wakes watchers.
  void Apply(Decisions d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One pass of the monitor: dead heartbeats, silent unregistered streams,
  // symptom errors past their grace.
  void MonitorOnce() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool BackgroundReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || !background_.empty();
  }
  void MonitorLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void BackgroundLoop() ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const CoordinatorOptions options_;
  const Env* const env_;

  absl::Mutex mu_;
  // Signalled on any job change (WatchJob waits on it) and on shutdown.
  absl::CondVar changed_;
  WorkerRegistry workers_ ABSL_GUARDED_BY(mu_);
  // Holds a pointer to workers_; called only under mu_.
  JobTable jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);
  // Join streams that have not registered yet, and since when; the monitor
  // cancels those silent for options_.register_timeout.
  std::map<grpc::ServerContext*, absl::Time> unregistered_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  StreamSlots session_slots_ ABSL_GUARDED_BY(mu_);  // Join + WatchJob
  StreamSlots blob_slots_ ABSL_GUARDED_BY(mu_);     // PutBlob + GetBlob
  // PutBlob streams by their last chunk's time.
  std::map<grpc::ServerContext*, absl::Time> uploads_ ABSL_GUARDED_BY(mu_);
  // EndJob calls for the background thread, in decision order.
  std::deque<ShardEndJob> background_ ABSL_GUARDED_BY(mu_);

  std::thread monitor_;
  std::thread background_thread_;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_COORDINATOR_H_
