#include "common/grpc/security_flags.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/metrics/metrics.h"

ABSL_FLAG(std::string, token_file, "",
          "File holding the cluster token, required on every RPC (the issue "
          "calls it --token-file; both spellings work in the CLI). Default: "
          "the GRADSYNC_TOKEN environment variable; the file wins when both "
          "are given. Daemons refuse to start without a token unless "
          "--auth=none. Make one with: head -c 32 /dev/urandom | od -An -tx1 "
          "| tr -d ' \\n' > token; chmod 600 token");
ABSL_FLAG(std::string, auth, "token",
          "token: every RPC must carry the cluster token (default). none: no "
          "authentication at all, anyone who reaches the port may submit, "
          "cancel, join or read parameters (trusted networks only; logged "
          "as a warning).");
ABSL_FLAG(std::string, tls_cert, "",
          "Mutual TLS: this process's certificate (PEM; SAN DNS:gradsync, "
          "see deploy/make-dev-certs.sh). Give --tls_cert, --tls_key and "
          "--tls_ca together; every channel and port then uses TLS and "
          "servers require a client certificate signed by the CA.");
ABSL_FLAG(std::string, tls_key, "", "Mutual TLS: the private key of --tls_cert (PEM).");
ABSL_FLAG(std::string, tls_ca, "", "Mutual TLS: the cluster CA certificate (PEM).");

namespace gradsync {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream content;
  content << in.rdbuf();
  if (content.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is empty"));
  }
  return content.str();
}

absl::Status ResolveTls(const SecuritySettings& s, ClusterSecurity* out) {
  const int given = !s.tls_cert.empty() + !s.tls_key.empty() + !s.tls_ca.empty();
  if (given == 0) return absl::OkStatus();
  if (given != 3) {
    return absl::InvalidArgumentError(
        "--tls_cert, --tls_key and --tls_ca go together (all or none)");
  }
  absl::StatusOr<std::string> cert = ReadPem(s.tls_cert, "--tls_cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(s.tls_key, "--tls_key");
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> ca = ReadPem(s.tls_ca, "--tls_ca");
  if (!ca.ok()) return ca.status();
  out->tls_cert_pem = *std::move(cert);
  out->tls_key_pem = *std::move(key);
  out->tls_ca_pem = *std::move(ca);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResolveToken(const SecuritySettings& s) {
  if (!s.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(s.token_file);
    if (!token.ok()) {
      return absl::Status(token.status().code(),
                          absl::StrCat("--token_file: ", token.status().message()));
    }
    return token;
  }
  if (!s.env_token.empty()) return ValidateToken(s.env_token, "GRADSYNC_TOKEN");
  return std::string();
}

}  // namespace

absl::StatusOr<ClusterSecurity> ResolveSecurity(const SecuritySettings& settings,
                                                SecurityRole role) {
  if (settings.auth != "token" && settings.auth != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth must be token or none, got '", settings.auth, "'"));
  }
  ClusterSecurity out;
  if (settings.auth == "token") {
    absl::StatusOr<std::string> token = ResolveToken(settings);
    if (!token.ok()) return token.status();
    out.token = *std::move(token);
    if (out.token.empty() && role == SecurityRole::kDaemon) {
      return absl::FailedPreconditionError(
          "no cluster token: give --token_file=PATH or set GRADSYNC_TOKEN "
          "(see --help), or run without authentication with --auth=none");
    }
  }
  if (absl::Status st = ResolveTls(settings, &out); !st.ok()) return st;
  return out;
}

absl::StatusOr<ClusterSecurity> SecurityFromCommandLine(SecurityRole role) {
  SecuritySettings s;
  s.token_file = absl::GetFlag(FLAGS_token_file);
  if (const char* env = std::getenv("GRADSYNC_TOKEN")) s.env_token = env;
  s.auth = absl::GetFlag(FLAGS_auth);
  s.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  s.tls_key = absl::GetFlag(FLAGS_tls_key);
  s.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  absl::StatusOr<ClusterSecurity> out = ResolveSecurity(s, role);
  if (out.ok() && role == SecurityRole::kDaemon && s.auth == "none") {
    spdlog::warn(
        "--auth=none: NO AUTHENTICATION. Anyone who can reach this "
        "process's ports may submit and cancel jobs, join as a "
        "worker and read or overwrite parameters.");
  }
  return out;
}

void CountAuthRefusals(MetricsRegistry* registry, ClusterSecurity* security) {
  Counter* refusals =
      registry->AddCounter("gradsync_auth_refusals_total",
                           "gRPC calls refused for a missing or invalid cluster token.");
  security->on_refusal = [refusals] { refusals->Increment(); };
}

}  // namespace gradsync
