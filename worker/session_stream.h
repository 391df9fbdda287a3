// The worker's session with the coordinator (Coordinator.Join) on gRPC's
// callback API, with blocking Read and Write for the daemon's threads.
//
// Why not the synchronous stream: a thread blocked in a synchronous Read
// waits on a completion queue that takes part in gRPC's polling, so the
// session thread, idle for a whole job, also picked up peers' frames and
// handed them on: one more thread and context switch per small message
// (docs/lab-notes/data-plane-targets.md). Here the session thread waits on
// an absl::CondVar and gRPC's own threads deliver the messages.
#ifndef GRADSYNC_WORKER_SESSION_STREAM_H_
#define GRADSYNC_WORKER_SESSION_STREAM_H_

#include <deque>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

namespace gradsync {

class SessionStream final
    : public grpc::ClientBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage> {
 public:
  // Starts Join on `stub` with `ctx`; both must outlive this object.
  SessionStream(v1::Coordinator::Stub* stub, grpc::ClientContext* ctx);
  // Cancels the call if Finish was not called, and waits for its end.
  ~SessionStream() override;

  // The next message; false once the stream has ended (no more will come).
  bool Read(v1::CoordinatorMessage* m);
  // Writes `m`, blocking until gRPC has taken it; false once the stream is
  // broken or finishing. One caller at a time (WorkerDaemon's write_mu_).
  bool Write(const v1::WorkerMessage& m);
  // Stops further writes, waits for the call to end (the caller has read to
  // the end or cancelled the context) and returns its status. Once only.
  grpc::Status Finish();

 private:
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  grpc::ClientContext* const ctx_;
  absl::Mutex mu_;
  v1::CoordinatorMessage reading_;  // the read in flight (gRPC's)
  std::deque<v1::CoordinatorMessage> inbox_ ABSL_GUARDED_BY(mu_);
  bool read_over_ ABSL_GUARDED_BY(mu_) = false;
  v1::WorkerMessage writing_;  // the write in flight; Write's caller's
  bool write_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool write_ok_ ABSL_GUARDED_BY(mu_) = true;
  // Set by Finish: no more writes; the write hold is released.
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SESSION_STREAM_H_
