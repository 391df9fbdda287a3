// The command-line flags of cluster security, shared by gradsync-server,
// gradsync-worker and the gradsync CLI: --token_file, --auth, --tls_cert,
// --tls_key, --tls_ca, plus the GRADSYNC_TOKEN environment variable.
#ifndef GRADSYNC_COMMON_GRPC_SECURITY_FLAGS_H_
#define GRADSYNC_COMMON_GRPC_SECURITY_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/grpc/security.h"

namespace gradsync {

class MetricsRegistry;

// The raw settings, as given.
struct SecuritySettings {
  std::string token_file;                 // --token_file
  std::string env_token;                  // $GRADSYNC_TOKEN
  std::string auth = "token";             // --auth: token or none
  std::string tls_cert, tls_key, tls_ca;  // --tls_*: PEM file paths
};

// Who resolves: a daemon must have a token unless auth is "none" (secure by
// default); a client sends one when it has one.
enum class SecurityRole { kDaemon, kClient };

// Turns settings into a ClusterSecurity (without on_refusal):
// 1. --auth must be token or none; none drops any token.
// 2. The token comes from --token_file when set (a file wins over the
//    environment), else from GRADSYNC_TOKEN; both are validated.
// 3. A daemon with auth=token and no token: FAILED_PRECONDITION saying how to
//    give one or to opt out.
// 4. TLS: all three of --tls_cert, --tls_key and --tls_ca, or none of them;
//    the files are read here (NOT_FOUND naming a missing one).
absl::StatusOr<ClusterSecurity> ResolveSecurity(const SecuritySettings& settings,
                                                SecurityRole role);

// ResolveSecurity over this process's flags and environment. With
// --auth=none a daemon logs a warning that anyone can reach it.
absl::StatusOr<ClusterSecurity> SecurityFromCommandLine(SecurityRole role);

// Registers gradsync_auth_refusals_total in `registry` and points
// security->on_refusal at it. `registry` must outlive every server started
// with `security`.
void CountAuthRefusals(MetricsRegistry* registry, ClusterSecurity* security);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_GRPC_SECURITY_FLAGS_H_
