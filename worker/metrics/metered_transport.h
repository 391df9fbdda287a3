// A Transport that counts the bytes each rank exchanges with each peer and
// passes every call on to the transport it wraps (the worker wraps its
// GrpcTransport, so the gRPC data path itself carries no metrics code).
//
// Bytes are tensor payload (4 per float): frame headers and gRPC/HTTP2
// framing are not included. A message counts as sent when Send, SendSum or
// Forward accepted it, and as received when Recv returned it.
#ifndef GRADSYNC_WORKER_METRICS_METERED_TRANSPORT_H_
#define GRADSYNC_WORKER_METRICS_METERED_TRANSPORT_H_

#include <memory>
#include <vector>

#include "common/metrics/metrics.h"
#include "worker/collectives/forwarding_transport.h"

namespace gradsync {

// Threading: as the wrapped transport's (one collective thread for
// Send/Recv, Abort from any thread); counting adds an atomic add per call.
class MeteredTransport final : public ForwardingTransport {
 public:
  // `inner` and the families must outlive this; one child per peer rank
  // (label peer = its rank) is looked up here, none on the data path.
  MeteredTransport(Transport* inner, CounterFamily* sent_bytes,
                   CounterFamily* received_bytes);

  absl::Status Send(int peer, const ChunkTag& tag, float* data, size_t n,
                    uint64_t checksum) override;
  absl::Status SendSum(int peer, const ChunkTag& tag, const float* a,
                       const RecvChunk& chunk, float* store) override;
  absl::Status Forward(int peer, const ChunkTag& tag, const RecvChunk& chunk,
                       uint64_t checksum) override;
  absl::StatusOr<std::unique_ptr<RecvChunk>> Recv(int peer, const ChunkTag& expected,
                                                  size_t n, absl::Time deadline) override;

 private:
  // Counts the payload bytes of `elements` wire elements on
  // `counters[peer]` when `st` is OK; returns `st`.
  absl::Status Count(const std::vector<Counter*>& counters, int peer, size_t elements,
                     absl::Status st) const;

  const std::vector<Counter*> sent_;      // by peer rank
  const std::vector<Counter*> received_;  // by peer rank
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_METRICS_METERED_TRANSPORT_H_
