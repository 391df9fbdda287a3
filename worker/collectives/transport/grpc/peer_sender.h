// The sending side of the gRPC transport: one client stream to one peer's
// Peer service (peer_service.h), a queue of frames with one write in flight.
// The stream presents the job's credentials when it opens; the Transport
// that owns the senders is GrpcTransport (grpc_transport.h).
#ifndef GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_PEER_SENDER_H_
#define GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_PEER_SENDER_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "worker/collectives/transport/grpc/peer_mailboxes.h"

namespace gradsync {

// One outgoing stream to one peer: a queue of frames, one write in flight.
// Enqueue from one thread at a time; Cancel from any thread; Close once the
// owner sends no more.
class PeerSender final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `creds` are presented when the stream opens (PeerService admits them);
  // `bulk` picks the channel arguments of a bulk lane (MakePeerChannel).
  PeerSender(const std::string& target, const PeerCredentials& creds, bool bulk);

  // Connects and opens the stream by `deadline` on `env`'s clock.
  // `abandon`: WaitForConnected's (the transport was aborted).
  absl::Status Start(absl::Time deadline, const std::function<absl::Status()>& abandon,
                     const Env* env);

  // Queues one frame; an error once the stream has ended or is closing.
  absl::Status Enqueue(grpc::ByteBuffer buf);

  // Half-closes after the queued frames and waits for the end of the call;
  // cancels it if that takes past `deadline` on `env`'s clock.
  void Close(absl::Time deadline, const Env* env);

  void Cancel() { ctx_.TryCancel(); }

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool /*ok*/) override {}
  void OnDone(const grpc::Status& s) override;

 private:
  const std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  grpc::ClientContext ctx_;
  grpc::ByteBuffer ack_;
  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_PEER_SENDER_H_
