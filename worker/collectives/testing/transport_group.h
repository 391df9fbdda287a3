// A group of ranks in one process joined by one kind of transport, for the
// tests and benchmarks of collectives (Gloo runs every algorithm test over
// every transport through one such fixture).
#ifndef GRADSYNC_WORKER_COLLECTIVES_TESTING_TRANSPORT_GROUP_H_
#define GRADSYNC_WORKER_COLLECTIVES_TESTING_TRANSPORT_GROUP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/collectives/transport.h"

namespace gradsync {

enum class TransportKind {
  kInProc,  // InProcGroup: shared queues between threads
  kGrpc,    // GrpcTransport: one Peer server per rank on 127.0.0.1
};

// "inproc", "grpc": for test names and benchmark labels.
std::string TransportKindName(TransportKind kind);

class InProcGroup;

// Owns the transports of `size` ranks of one job and, for kGrpc, each rank's
// Peer server and mailboxes; the destructor shuts all of them down.
// transport(r) may be used from rank r's thread while others use theirs
// (each Transport's own threading rules apply).
class TransportGroup {
 public:
  // Builds the group. For kGrpc, starts one Peer server per rank on
  // 127.0.0.1:0 and connects nothing yet (senders connect on first Send).
  // INVALID_ARGUMENT for size < 1; UNAVAILABLE if a server cannot listen.
  // `connections_per_peer` and `bulk_bytes` are GrpcTransportOptions'
  // (kGrpc only; bulk_bytes > 0 also starts each rank's bulk Peer server;
  // the default is the jobs' default, so the algorithm tests' large sizes
  // run on bulk connections and their small ones do not); messages travel
  // as `dtype` on either kind.
  static absl::StatusOr<std::unique_ptr<TransportGroup>> Create(
      TransportKind kind, int size, int connections_per_peer = 1,
      WireDtype dtype = WireDtype::kFp32, size_t bulk_bytes = size_t{4} << 20);

  TransportGroup(const TransportGroup&) = delete;
  TransportGroup& operator=(const TransportGroup&) = delete;

  // Destroys the transports first (a gRPC one half-closes its streams and
  // waits for them, at most 5 s), then stops the servers (deadline 1 s,
  // after which calls still open are cancelled).
  ~TransportGroup();

  TransportKind kind() const { return kind_; }
  int size() const { return size_; }
  // Rank `rank`'s transport, owned by the group; 0 <= rank < size().
  Transport* transport(int rank);
  // kGrpc: Peer streams that rank `rank`'s server (or its bulk server) has
  // accepted so far; 0 for kInProc.
  int64_t streams_accepted(int rank, bool bulk) const;

 private:
  struct GrpcPeer;  // one rank's server, service and mailboxes

  TransportGroup(TransportKind kind, int size);

  const TransportKind kind_;
  const int size_;
  std::unique_ptr<InProcGroup> inproc_;                      // kInProc
  std::vector<std::unique_ptr<GrpcPeer>> peers_;             // kGrpc, by rank
  std::vector<std::unique_ptr<Transport>> grpc_transports_;  // kGrpc, by rank
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_TESTING_TRANSPORT_GROUP_H_
