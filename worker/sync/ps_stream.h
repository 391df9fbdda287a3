// The client side of ParameterServer.PushPullStream (server/ps/ps_stream.h):
// one stream to one PS shard for one job and rank, kept open across steps.
// PsClient writes a GRAD frame per partition; the shard answers each with a
// PARAMS frame naming the partition's slice, in the order the steps
// complete. While a PsClient call runs, a sink attached to the stream takes
// those answers, and hears how the stream ended if it ends.
#ifndef GRADSYNC_WORKER_SYNC_PS_STREAM_H_
#define GRADSYNC_WORKER_SYNC_PS_STREAM_H_

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"

namespace gradsync {

// Told of one stream's answers and end. Called on gRPC's threads under the
// stream's lock: must not block, nor call back into the stream.
class PsStreamSink {
 public:
  virtual ~PsStreamSink() = default;
  virtual void Answered(grpc::ByteBuffer frame) = 0;
  // The stream ended: `why` is never OK (a shard that ends a stream with
  // OK while pushes are unanswered is reported as UNAVAILABLE).
  virtual void Ended(const absl::Status& why) = 0;
};

// Thread-safe. Create with Open; the object lives until gRPC is done with
// the call, however long its owner keeps it.
class PsPushStream final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Opens the stream to `address` over `stub`, with `metadata` (the PS
  // credentials) sent once at open. No wait for the connection: writes
  // queue until the call starts, and a shard that cannot be reached ends
  // the stream (UNAVAILABLE), as it fails a unary call.
  static std::shared_ptr<PsPushStream> Open(
      grpc::GenericStub* stub, std::string address,
      const std::vector<std::pair<std::string, std::string>>& metadata);

  // The sink for answers from now on (null: drop them). If the stream has
  // ended already, the new sink hears Ended at once.
  void Attach(PsStreamSink* sink);
  // Queues `frame`; the error (the stream's end) when it has ended.
  absl::Status Write(grpc::ByteBuffer frame);
  // True once the stream ended or is being cancelled: open another.
  bool ended() const;
  // True once gRPC is done with the call (OnDone ran).
  bool done() const;
  // Ends the stream: pending answers are lost, the sink hears Ended
  // (CANCELLED). Idempotent.
  void Cancel();
  // Half-closes and waits until the shard ends the stream, at most until
  // `deadline` on `env`'s clock; cancels it then. Use when nothing is
  // pending.
  void Close(absl::Time deadline, const Env* env = Env::Default());

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& s) override;

 private:
  explicit PsPushStream(std::string address) : address_(std::move(address)) {}
  // True exactly once: the caller then removes the hold (outside mu_) and
  // so lets OnDone run, when no more writes come from outside the
  // reactions (cancel, close, or the shard ended the stream).
  bool TakeHold() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string address_;
  grpc::ClientContext ctx_;
  grpc::ByteBuffer read_;  // the one read in flight (reactions only)

  mutable absl::Mutex mu_;
  std::shared_ptr<PsPushStream> self_ ABSL_GUARDED_BY(mu_);  // until OnDone
  PsStreamSink* sink_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);  // front: in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // no more writes from outside
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_ ABSL_GUARDED_BY(mu_);  // once done_
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_PS_STREAM_H_
