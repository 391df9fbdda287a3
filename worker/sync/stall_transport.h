// A Transport that reports a Recv waiting longer than the stall threshold
// (stall_watch.h), naming the peer and the expected tag's step, bucket and
// phase, and passes every call on to the transport it wraps (the worker
// wraps its metered GrpcTransport; the data path carries no stall code).
//
// A Recv is split at the threshold: the inner Recv is called with the
// earlier of the threshold and the caller's deadline, and once more with
// the caller's deadline after a report. This relies on a Recv that ends
// DEADLINE_EXCEEDED having consumed nothing, as the gRPC and in-process
// transports guarantee (their mailbox wait leaves the queue untouched).
#ifndef GRADSYNC_WORKER_SYNC_STALL_TRANSPORT_H_
#define GRADSYNC_WORKER_SYNC_STALL_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "worker/collectives/forwarding_transport.h"
#include "worker/sync/stall_watch.h"

namespace gradsync {

// Threading: as the wrapped transport's (one collective thread for
// Send/Recv, Abort from any thread).
class StallTransport final : public ForwardingTransport {
 public:
  // `inner` and `watch` must outlive this. peer_addresses[r] is rank r's
  // address, shown in reports (may be shorter: then the rank alone).
  StallTransport(Transport* inner, const StallWatch* watch,
                 std::vector<std::string> peer_addresses);

  absl::StatusOr<std::unique_ptr<RecvChunk>> Recv(int peer, const ChunkTag& expected,
                                                  size_t n, absl::Time deadline) override;

 private:
  // What a report of a Recv from `peer` for `expected` says.
  StallReport Describe(int peer, const ChunkTag& expected) const;

  const StallWatch* const watch_;
  const std::vector<std::string> peers_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_STALL_TRANSPORT_H_
