// The Coordinator: job queue, worker registry, rank assignment and rendezvous,
// progress events, failure handling.
//
// Threading: gRPC's sync server threads call the RPC methods concurrently;
// each worker's Join stream is served by one thread for the life of the
// worker. A monitor thread expires workers whose heartbeats stop, and a
// background thread makes the blocking calls that end jobs on PS shards. All
// state is guarded by mu_; each worker session has a writer thread that alone
// writes to its stream.
#ifndef GRADSYNC_SERVER_COORDINATOR_COORDINATOR_H_
#define GRADSYNC_SERVER_COORDINATOR_COORDINATOR_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

namespace gradsync {

struct CoordinatorOptions {
  // PS shard addresses in shard order; a job with ps_shards = S uses the
  // first S. Empty: the coordinator cannot run PS jobs.
  std::vector<std::string> ps_addresses;
  // A worker silent for this long is declared dead.
  absl::Duration heartbeat_timeout = absl::Seconds(6);
};

class Coordinator final : public v1::Coordinator::Service {
 public:
  explicit Coordinator(CoordinatorOptions options);
  ~Coordinator() override;

  grpc::Status SubmitJob(grpc::ServerContext* ctx,
                         const v1::SubmitJobRequest* req, v1::Job* resp) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                      v1::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx,
                        const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override;
  grpc::Status CancelJob(grpc::ServerContext* ctx,
                         const v1::CancelJobRequest* req, v1::Job* resp) override;
  grpc::Status WatchJob(grpc::ServerContext* ctx,
                        const v1::WatchJobRequest* req,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status Join(grpc::ServerContext* ctx,
                    grpc::ServerReaderWriter<v1::CoordinatorMessage,
                                             v1::WorkerMessage>* stream) override;

  // Sets shard 0's address once the server knows its port (role=all).
  void SetShardZeroAddress(const std::string& address);

  // Ends watchers and worker sessions; call before Server::Shutdown.
  void Shutdown();

 private:
  using Stream =
      grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>;

  // A worker's stream as seen by writers on other threads. The Join handler
  // clears `stream` (under mu) before it returns and the stream dies.
  //
  // Messages are queued in order while the coordinator's mu_ is held (Post)
  // and written by the session's own writer thread, so a worker sees them in
  // the order the coordinator decided them and no shared thread ever blocks
  // on one worker's stream.
  struct WriteChannel {
    Stream* stream = nullptr;  // constant; used by the writer thread only
    absl::Mutex mu;
    std::deque<v1::CoordinatorMessage> queue ABSL_GUARDED_BY(mu);
    bool closed ABSL_GUARDED_BY(mu) = false;
  };

  struct Worker {
    std::string id;
    std::string peer_address;
    int num_gpus = 0;
    int64_t order = 0;          // registration order
    std::string job_id;         // empty when idle
    absl::Time last_seen;
    grpc::ServerContext* ctx = nullptr;
    std::shared_ptr<WriteChannel> chan;  // null once the session ended
    bool dead = false;
  };

  struct JobEntry {
    v1::Job job;
    int64_t seq = 0;                       // bumped on every change
    std::vector<v1::JobEvent> events;      // STATE and EPOCH events
    v1::JobEvent progress;                 // latest PROGRESS event
    int64_t progress_seq = 0;
    std::vector<bool> done;                // per rank JobDone received
    std::vector<v1::WorkerMessage::JobDone> results;
    std::vector<double> rank_wall;         // per rank training seconds
    std::map<int, std::vector<v1::WorkerMessage::EpochDone>> epochs;
    std::vector<std::string> init_checksums;
    std::vector<double> rank_samples_per_second;
    absl::Time started;
    // A rank's error that may be a symptom (a peer vanished): held for
    // kSymptomGrace so that a lost worker, the likely cause, is reported.
    std::string pending_error;
    absl::Time pending_since;
  };

  // Queues a message for a worker's writer thread (call under mu_, so that
  // queue order is decision order). No-op for a closed or null channel.
  static void Post(const std::shared_ptr<WriteChannel>& chan,
                   v1::CoordinatorMessage msg);
  // The writer thread of one worker session.
  static void WriterLoop(std::shared_ptr<WriteChannel> chan);

  void Schedule() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a running or queued job with `state` and `error`: cancels its
  // workers, schedules EndJob on its PS shards.
  void EndJob(JobEntry* e, v1::JobState state, const std::string& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finalize(JobEntry* e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddStateEvent(JobEntry* e, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLost(const std::string& worker_id, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleMessage(const std::string& worker_id, const v1::WorkerMessage& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Background(std::function<void()> fn);
  void MonitorLoop();
  void BackgroundLoop();

  const CoordinatorOptions options_;
  std::string id_prefix_;  // set in the constructor, then constant

  absl::Mutex mu_;
  absl::CondVar changed_;
  std::vector<std::string> ps_addresses_ ABSL_GUARDED_BY(mu_);  // signalled on any job change
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, JobEntry> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> job_order_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  int64_t next_job_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_worker_order_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> background_ ABSL_GUARDED_BY(mu_);
  // Join streams that have not registered yet, and since when; the monitor
  // cancels those silent for kRegisterTimeout.
  std::map<grpc::ServerContext*, absl::Time> unregistered_ ABSL_GUARDED_BY(mu_);

  std::thread monitor_;
  std::thread background_thread_;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_COORDINATOR_H_
