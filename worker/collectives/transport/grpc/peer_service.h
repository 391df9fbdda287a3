// The Peer service, the receiving side of the gRPC transport: each incoming
// stream is authenticated when it opens (PeerMailboxes::Admit) and its
// frames land in that job's mailbox (peer_mailboxes.h), one bounded FIFO per
// sending rank; a full mailbox parks the stream until the collective makes
// room. The sending side is PeerSender (peer_sender.h), the Transport that
// uses both GrpcTransport (grpc_transport.h).
#ifndef GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_PEER_SERVICE_H_
#define GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_PEER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "common/grpc/refusal_log.h"
#include "common/metrics/metrics.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "worker/collectives/transport/grpc/peer_mailboxes.h"

namespace gradsync {

// The Peer service: one reactor per incoming stream, one read in flight.
// A stream refused PERMISSION_DENIED is logged with the caller's address
// (rate-limited, RefusalLog).
class PeerService final
    : public v1::Peer::WithRawCallbackMethod_Stream<v1::Peer::Service> {
 public:
  // `streams`, when not null, counts the streams opened (a metric).
  explicit PeerService(PeerMailboxes* mailboxes, Counter* streams = nullptr)
      : mailboxes_(mailboxes),
        streams_metric_(streams),
        refusals_(std::make_shared<RefusalLog>()) {}
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Stream(
      grpc::CallbackServerContext* ctx) override;
  // Streams opened to this service so far (admitted or not).
  int64_t streams_accepted() const { return streams_.load(); }

 private:
  PeerMailboxes* const mailboxes_;
  Counter* const streams_metric_;
  std::atomic<int64_t> streams_{0};
  // Shared with the reactors, whose admission may be answered late.
  const std::shared_ptr<RefusalLog> refusals_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_PEER_SERVICE_H_
