#include "worker/collectives/testing/transport_group.h"

#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/grpc/grpc_util.h"
#include "worker/collectives/transport/grpc/grpc_transport.h"
#include "worker/collectives/transport/inproc/inproc_transport.h"

namespace gradsync {
namespace {

// Each group has its own servers, so one job id serves every group.
constexpr char kJobId[] = "transport-group";
// Peer streams are admitted only with the job's secret (peer_mailboxes.h).
constexpr char kJobSecret[] = "transport-group-secret";

}  // namespace

// Declared in the order of construction: the server refers to the service,
// the service to the mailboxes.
struct TransportGroup::GrpcPeer {
  PeerMailboxes mailboxes;
  std::unique_ptr<PeerService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<PeerService> bulk_service;  // bulk_bytes > 0
  std::unique_ptr<grpc::Server> bulk_server;
};

std::string TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kInProc:
      return "inproc";
    case TransportKind::kGrpc:
      return "grpc";
  }
  return "unknown";
}

TransportGroup::TransportGroup(TransportKind kind, int size) : kind_(kind), size_(size) {}

absl::StatusOr<std::unique_ptr<TransportGroup>> TransportGroup::Create(
    TransportKind kind, int size, int connections_per_peer, WireDtype dtype,
    size_t bulk_bytes) {
  if (size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a transport group needs a rank, not ", size));
  }
  auto group = absl::WrapUnique(new TransportGroup(kind, size));
  if (kind == TransportKind::kInProc) {
    group->inproc_ = std::make_unique<InProcGroup>(size, dtype);
    return group;
  }
  std::vector<std::string> addresses;
  std::vector<std::string> bulk_addresses;
  for (int r = 0; r < size; ++r) {
    auto peer = std::make_unique<GrpcPeer>();
    peer->service = std::make_unique<PeerService>(&peer->mailboxes);
    absl::StatusOr<StartedServer> started =
        StartPeerServer("127.0.0.1:0", {peer->service.get()});
    // On failure ~TransportGroup stops the servers already started.
    if (!started.ok()) return started.status();
    peer->server = std::move(started->server);
    addresses.push_back(LocalAddress("127.0.0.1:0", started->port));
    if (bulk_bytes > 0) {
      peer->bulk_service = std::make_unique<PeerService>(&peer->mailboxes);
      absl::StatusOr<StartedServer> bulk =
          StartPeerServer("127.0.0.1:0", {peer->bulk_service.get()}, /*bulk=*/true);
      if (!bulk.ok()) {
        peer->server->Shutdown(ToChrono(Env::Default()->Now()));
        return bulk.status();
      }
      peer->bulk_server = std::move(bulk->server);
      bulk_addresses.push_back(LocalAddress("127.0.0.1:0", bulk->port));
    }
    group->peers_.push_back(std::move(peer));
  }
  GrpcTransportOptions options;
  options.connections_per_peer = connections_per_peer;
  options.wire_dtype = dtype;
  options.job_secret = kJobSecret;
  options.bulk_bytes = bulk_bytes;
  options.bulk_peer_addresses = bulk_addresses;
  for (int r = 0; r < size; ++r) {
    group->grpc_transports_.push_back(std::make_unique<GrpcTransport>(
        kJobId, r, addresses, group->peers_[r]->mailboxes.Open(kJobId, kJobSecret, size),
        options));
  }
  return group;
}

TransportGroup::~TransportGroup() {
  grpc_transports_.clear();
  const absl::Time deadline = Env::Default()->Now() + absl::Seconds(1);
  for (auto& peer : peers_) {
    peer->server->Shutdown(ToChrono(deadline));
    if (peer->bulk_server) peer->bulk_server->Shutdown(ToChrono(deadline));
  }
  peers_.clear();
}

int64_t TransportGroup::streams_accepted(int rank, bool bulk) const {
  if (kind_ != TransportKind::kGrpc) return 0;
  const GrpcPeer& p = *peers_[rank];
  const PeerService* s = bulk ? p.bulk_service.get() : p.service.get();
  return s == nullptr ? 0 : s->streams_accepted();
}

Transport* TransportGroup::transport(int rank) {
  if (kind_ == TransportKind::kInProc) return inproc_->transport(rank);
  return grpc_transports_[rank].get();
}

}  // namespace gradsync
