// worker/: the worker daemon and its main; the layers it is built from live
// in collectives/, model/, sync/ and train/.
//
// The worker daemon: serves Peer, keeps a session with the coordinator
// (register, heartbeats, reports) and hands the jobs it is assigned to its
// JobRunner (job_runner.h), which runs one at a time.
//
// Threads: the session thread (Run) reads coordinator messages (from a
// callback-API stream, worker/session_stream.h); a heartbeat thread writes
// heartbeats; the JobRunner's job thread trains. Writes to the session
// stream are serialised by write_mu_; stall reports (worker/sync/
// stall_watch.h) are written from whichever thread waited.
#ifndef GRADSYNC_WORKER_WORKER_DAEMON_H_
#define GRADSYNC_WORKER_WORKER_DAEMON_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "worker/collectives/transport/grpc/grpc_transport.h"
#include "worker/job_runner.h"
#include "worker/metrics/worker_metrics.h"
#include "worker/session_stream.h"
#include "worker/worker_options.h"

namespace gradsync {

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
  class Heartbeats;

  // One session; returns when the stream ends.
  absl::Status Session();
  // Dispatches the coordinator's messages until the stream ends.
  void ReadCoordinatorMessages(SessionStream* stream);
  bool Write(const v1::WorkerMessage& m);

  const WorkerOptions options_;
  const Env* const env_;  // options_.env
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
  // The job half; built in the constructor, once id_ is known.
  std::unique_ptr<JobRunner> jobs_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_WORKER_DAEMON_H_
