// gRPC plumbing shared by all daemons: status conversion, channel and server
// arguments (message limits, keepalive), connecting with a deadline.
#ifndef GRADSYNC_COMMON_GRPC_GRPC_UTIL_H_
#define GRADSYNC_COMMON_GRPC_GRPC_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

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

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// Builds and starts a server on `listen` (port 0 picks one) with
// ConfigureServerBuilder's settings and the given services, which must
// outlive it. UNAVAILABLE naming the address when it cannot listen.
absl::StatusOr<StartedServer> StartServer(
    const std::string& listen, const std::vector<grpc::Service*>& services);

// "HOST:port" for others to dial: the listen host, with a wildcard (empty,
// 0.0.0.0, [::]) replaced by 127.0.0.1.
std::string LocalAddress(const std::string& listen, int port);

// Waits until `channel` is connected. UNAVAILABLE naming `target` when the
// deadline passes first.
absl::Status WaitForConnected(grpc::Channel* channel, const std::string& target,
                              absl::Time deadline);

inline std::chrono::system_clock::time_point ToChrono(absl::Time t) {
  return absl::ToChronoTime(t);
}

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_GRPC_GRPC_UTIL_H_
