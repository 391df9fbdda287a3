// Cluster authentication for every gRPC channel and server of a process: a
// shared cluster token sent as `authorization: Bearer TOKEN` on every call,
// and optional mutual TLS.
//
// Trust model: a caller is a cluster member when it presents the token (and,
// with TLS, a certificate signed by the cluster CA). Every cluster
// certificate carries the one identity kClusterTlsName, which every channel
// expects instead of the dialled host name, because peer addresses (IPs from
// `compose --scale`, `--advertise=auto`) are not known when certs are made.
//
// Server side: StartServer (grpc_util.h) builds every listening port with
// ServerCredentialsFor, whose auth-metadata processor runs in gRPC core
// before any handler: a call without the right token ends UNAUTHENTICATED
// "missing or invalid cluster token" and no service code runs. The one
// exception is grpc.health.v1.Health, left open for Kubernetes' native gRPC
// probes, which cannot send metadata (it reveals serving status only).
// Client side: MakeChannel attaches the token to every call with a client
// interceptor (call credentials would be refused on plaintext channels); the
// data plane's channels leave it to each call (TokenOn::kCallerAdds,
// AddClusterToken), since the interceptor costs a gRPC batch per message.
#ifndef GRADSYNC_COMMON_GRPC_SECURITY_H_
#define GRADSYNC_COMMON_GRPC_SECURITY_H_

#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradsync {

// The metadata key carrying the token ("authorization: Bearer TOKEN").
inline constexpr char kTokenMetadataKey[] = "authorization";
// The name every cluster certificate carries (SAN DNS:gradsync) and every
// TLS channel checks.
inline constexpr char kClusterTlsName[] = "gradsync";
// The message of every refusal; it tells an attacker nothing else.
inline constexpr char kRefusalMessage[] = "missing or invalid cluster token";

// How this process authenticates. Empty token: calls carry none and servers
// check none (--auth=none). Empty PEMs: plaintext.
struct ClusterSecurity {
  std::string token;
  std::string tls_cert_pem;  // this process's certificate chain
  std::string tls_key_pem;   // its private key
  std::string tls_ca_pem;    // the cluster CA: peers' certs must chain to it
  // Called once per refused call, from a gRPC thread (e.g. a metrics
  // counter's Increment); may be empty.
  std::function<void()> on_refusal;

  bool tls() const { return !tls_ca_pem.empty(); }
};

// Sets what MakeChannel and StartServer of this process use from now on.
// Call once in main() before any channel or server exists; not safe to call
// concurrently with them. The default is no token, plaintext (unit tests).
void SetClusterSecurity(ClusterSecurity security);
const ClusterSecurity& GetClusterSecurity();

// Compares in time that depends on the lengths only, not on where the
// contents differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// Reads a token file: surrounding whitespace is dropped; the rest must be
// 16..4096 printable ASCII characters without spaces. INVALID_ARGUMENT or
// NOT_FOUND naming `path` otherwise.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);
// The same rules for a token given directly (e.g. $GRADSYNC_TOKEN).
absl::StatusOr<std::string> ValidateToken(std::string token, absl::string_view source);

// 256 random bits from /dev/urandom as 64 hex characters.
absl::StatusOr<std::string> RandomToken();

// Who puts the token on a channel's calls.
enum class TokenOn {
  // A client interceptor, on every call: nothing to forget. The interceptor
  // costs one more gRPC batch per streamed message (a 4 KiB allreduce at
  // N=4: 48 batches per barrier + allreduce instead of 32).
  kEveryCall,
  // Each caller, with AddClusterToken on its ClientContext: the data plane
  // (Peer streams, PS push/pull), where messages are many and small.
  kCallerAdds,
};

// A channel to `target` with `args` under `security`: TLS credentials
// expecting kClusterTlsName when security.tls(), and, when it is set, the
// token on the calls as `token_on` says.
std::shared_ptr<grpc::Channel> MakeSecureChannel(const std::string& target,
                                                 grpc::ChannelArguments args,
                                                 const ClusterSecurity& security,
                                                 TokenOn token_on = TokenOn::kEveryCall);

// Adds this process's token (GetClusterSecurity) to `ctx`'s metadata, as
// the interceptor of TokenOn::kEveryCall would; nothing without a token.
// Every call on a TokenOn::kCallerAdds channel needs it, before it starts.
void AddClusterToken(grpc::ClientContext* ctx);

// Credentials for a listening port: TLS requiring a client certificate signed
// by the CA when security.tls(); the token check when it has a token. The
// security is copied; the credentials may outlive the argument.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(
    const ClusterSecurity& security);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_GRPC_SECURITY_H_
