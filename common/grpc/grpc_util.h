// gRPC plumbing shared by all daemons: status conversion, channel and server
// arguments (message limits, keepalive), connecting with a deadline.
#ifndef GRADSYNC_COMMON_GRPC_GRPC_UTIL_H_
#define GRADSYNC_COMMON_GRPC_GRPC_UTIL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"

namespace gradsync {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// Keepalive: a ping every kKeepaliveTime on idle connections, dead after
// kKeepaliveTimeout without an answer. Both sides permit pings without calls so
// that job-long streams detect a vanished peer within ~10 s.
inline constexpr int kKeepaliveTimeMs = 5000;
inline constexpr int kKeepaliveTimeoutMs = 5000;

// How long one connection attempt may take, TCP handshake to the server's
// HTTP/2 SETTINGS. gRPC reads it from GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, so
// a short reconnect backoff alone would also cut every handshake short: at
// 200 ms a worker joining links that other ranks already fill (or a shard
// busy on a loaded machine) failed its first call with "timed out before
// receiving SETTINGS frame". A refused connection still fails at once and is
// retried after the short backoff.
inline constexpr int kMinConnectTimeoutMs = 5000;

// gRPC's bandwidth-delay-product probing on the collective data plane's
// streams (PeerChannelArgs, StartPeerServer; channels and servers made after
// the call). On (gRPC's default), the receiver pings with its data and grows
// the stream and connection windows to what the link seems to hold (many
// MiB on loopback); off, the windows stay at gRPC's initial size and a
// sender that runs ahead of its receiver waits instead of filling the
// receiver's memory with frames that go cold before they are reduced.
// Measured on 2 cores (docs/lab-notes/bdp-probing.md): off is faster for large
// tensors (64 MiB ring, 4 ranks: 0.73-0.76x -> 0.84-0.94x of Gloo's busbw)
// and slower for messages of 128 KiB - 1 MiB (hd at 256 KiB: 1.45 -> 2.0
// ms, `local --compare` allreduce-sync 5.2-5.6 -> 6.2-6.8 ms per step), so it
// stays on unless a job is known to move large tensors. GRPC_ARG_HTTP2_
// STREAM_LOOKAHEAD_BYTES measured no effect here (16 KiB and 4 MiB alike).
void SetPeerBdpProbe(bool on);
bool PeerBdpProbe();

// PS push/pull: whether a worker sends its pushes over one stream per shard
// (ParameterServer.PushPullStream, default) or one unary call per partition
// (PushPull). Read when a PsClient is made (worker/sync/ps_client.h).
void SetPsPushStreams(bool on);
bool PsPushStreams();

// Message sizes limited to kMaxMessageBytes (common/message_limits.h) both
// ways, keepalive as above.
// `own_connection` gives the channel its own subchannel pool, i.e. its own
// TCP connection even when another channel targets the same address.
grpc::ChannelArguments DefaultChannelArgs(bool own_connection = false);

// Channels and servers use this process's ClusterSecurity (security.h): TLS
// and the cluster token when main() set them.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           bool own_connection = false);

// Server side twin of DefaultChannelArgs.
void ConfigureServerBuilder(grpc::ServerBuilder* builder);

// The collective data plane (the Peer service, worker/collectives): a
// channel of its own (own_connection) with BDP probing as set above, or,
// for a bulk connection (`bulk`), never. PS channels and servers always
// probe: with probing off, PS push/pull of 64 MiB on emulated 1 Gbit hosts
// reached 83 % of the link bound against 92 % (ring and hd the same either
// way).
//
// Bulk connections: BDP probing is a setting of the receiving server, so a
// worker serves the Peer service twice, on its peer port (probing as set
// above) and on a bulk port (never probing); a collective of at least the
// job's peer_bulk_bytes sends on the bulk ones (GrpcTransportOptions), where
// a sender waits for its receiver instead of filling its memory.
//
// Peer and PS data channels carry the cluster token only on calls whose
// ClientContext got AddClusterToken (security.h, TokenOn::kCallerAdds): the
// token interceptor of other channels costs a gRPC batch per message.
grpc::ChannelArguments PeerChannelArgs(bool bulk = false);
std::shared_ptr<grpc::Channel> MakePeerChannel(const std::string& target,
                                               bool bulk = false);
// MakeChannel's settings for the PS data plane (PsClient's push/pull):
// every call on it must AddClusterToken.
std::shared_ptr<grpc::Channel> MakePsDataChannel(const std::string& target);

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// Builds and starts a server on `listen` (port 0 picks one) with
// ConfigureServerBuilder's settings and the given services, which must
// outlive it. UNAVAILABLE naming the address when it cannot listen.
absl::StatusOr<StartedServer> StartServer(const std::string& listen,
                                          const std::vector<grpc::Service*>& services);
// StartServer for the Peer service: with BDP probing as set above, or
// (`bulk`) never.
absl::StatusOr<StartedServer> StartPeerServer(const std::string& listen,
                                              const std::vector<grpc::Service*>& services,
                                              bool bulk = false);

// The host of "HOST:port": what precedes the last ':' ("10.0.0.1:5000" has
// host "10.0.0.1"); a bracketed IPv6 host is kept whole with its brackets
// ("[::1]:7000" and "[::1]" have host "[::1]"); an address without ':', or
// a bare IPv6 address (two or more ':', no brackets, so no port), is all
// host.
std::string AddressHost(const std::string& address);
// Whether every address has the same AddressHost (true for none or one).
bool OnOneHost(const std::vector<std::string>& addresses);

// The address of a bulk Peer server on `bulk_port` of the host that
// `advertise` ("HOST:port") names; "" when bulk_port is not a port (<= 0)
// or advertise has no port.
std::string BulkAddress(const std::string& advertise, int bulk_port);

// "HOST:port" for others to dial: the listen host, with a wildcard (empty,
// 0.0.0.0, [::]) replaced by 127.0.0.1.
std::string LocalAddress(const std::string& listen, int port);

// The end of a client stream's Close: waits (taking `mu`) until `*done`, a
// flag guarded by `mu` that the reactor's OnDone sets, or until `deadline` on
// `env`'s clock; past the deadline cancels `ctx` and waits for `*done`
// without a limit (a cancelled call ends at once).
void AwaitDoneOrCancel(absl::Mutex* mu, const bool* done, grpc::ClientContext* ctx,
                       absl::Time deadline, const Env* env) ABSL_LOCKS_EXCLUDED(mu);

// Waits until `channel` is connected. UNAVAILABLE naming `target` when the
// deadline passes first. With `abandon`, it is asked at least every
// kConnectPollInterval and a non-OK answer ends the wait with that status
// (a transport aborted while it connects to a peer that is gone).
inline constexpr absl::Duration kConnectPollInterval = absl::Milliseconds(100);
// `env` reads the clock that `deadline` is on; it must keep real time, as
// the wait itself is gRPC's.
absl::Status WaitForConnected(grpc::Channel* channel, const std::string& target,
                              absl::Time deadline,
                              const std::function<absl::Status()>& abandon = nullptr,
                              const Env* env = Env::Default());

inline std::chrono::system_clock::time_point ToChrono(absl::Time t) {
  return absl::ToChronoTime(t);
}

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_GRPC_GRPC_UTIL_H_
