#include "common/grpc/security.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpcpp/support/client_interceptor.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/refusal_log.h"

namespace gradsync {
namespace {

constexpr size_t kMinTokenChars = 16;
constexpr size_t kMaxTokenChars = 4096;
constexpr char kBearer[] = "Bearer ";
// Left open for Kubernetes' native gRPC probes (see the header).
constexpr char kHealthPathPrefix[] = "/grpc.health.v1.Health/";

ClusterSecurity& ProcessSecurity() {
  static ClusterSecurity* security = new ClusterSecurity();
  return *security;
}

absl::string_view SliceView(const grpc_slice& slice) {
  return absl::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)),
                           GRPC_SLICE_LENGTH(slice));
}

// What gRPC core tells the auth processor about the caller: its certificate
// name under TLS. Unescaped: RefusalLog escapes what it logs.
// Not its TCP address: in gRPC 1.51 no public API gives it for a call this
// processor refuses. The processor gets only the auth context and metadata
// (peer_ip is a certificate IP SAN); server interceptors are never created
// for a refused call (checked: the factory is not called), and one that
// refuses in their place can only TryCancel (the client sees CANCELLED and
// the handler still runs); the socket-mutator vtable is not in the public
// headers; channelz lists sockets but ties no call to one.
std::string DescribePeer(const grpc_auth_context* ctx) {
  std::string out;
  grpc_auth_property_iterator it = grpc_auth_context_property_iterator(ctx);
  while (const grpc_auth_property* p = grpc_auth_property_iterator_next(&it)) {
    const absl::string_view name(p->name);
    if (name == GRPC_X509_SUBJECT_PROPERTY_NAME ||
        name == GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME ||
        name == GRPC_PEER_IP_PROPERTY_NAME) {
      absl::StrAppend(&out, out.empty() ? "" : " ", name, "=",
                      absl::string_view(p->value, p->value_length));
    }
  }
  return out.empty() ? "unknown peer" : out;
}

// The server's token check: state of the gRPC core auth-metadata processor.
struct TokenCheck {
  std::string expected;  // "Bearer TOKEN"
  std::function<void()> on_refusal;
  RefusalLog log;
};

// grpc_auth_metadata_processor::process. Runs in gRPC core before the call
// reaches any service; answers synchronously. Accepted calls have the token
// removed from their metadata (handlers never see it).
void ProcessToken(void* state, grpc_auth_context* ctx, const grpc_metadata* md,
                  size_t num_md, grpc_process_auth_metadata_done_cb cb, void* user_data) {
  auto* check = static_cast<TokenCheck*>(state);
  absl::string_view path;
  const grpc_metadata* token = nullptr;
  for (size_t i = 0; i < num_md; ++i) {
    const absl::string_view key = SliceView(md[i].key);
    if (key == ":path") path = SliceView(md[i].value);
    if (key == kTokenMetadataKey && token == nullptr) token = &md[i];
  }
  if (absl::StartsWith(path, kHealthPathPrefix)) {
    cb(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_OK, nullptr);
    return;
  }
  if (token != nullptr && ConstantTimeEquals(SliceView(token->value), check->expected)) {
    cb(user_data, token, 1, nullptr, 0, GRPC_STATUS_OK, nullptr);
    return;
  }
  if (check->on_refusal) check->on_refusal();
  check->log.Refused(path.empty() ? "a call" : path, DescribePeer(ctx), kRefusalMessage);
  cb(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_UNAUTHENTICATED, kRefusalMessage);
}

void DestroyTokenCheck(void* state) { delete static_cast<TokenCheck*>(state); }

// Server credentials built in gRPC core so that the token processor can be
// attached to plaintext ports too (grpc::InsecureServerCredentials() aborts
// on SetAuthMetadataProcessor in gRPC 1.51).
class ClusterServerCredentials final : public grpc::ServerCredentials {
 public:
  explicit ClusterServerCredentials(ClusterSecurity security)
      : security_(std::move(security)) {}

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {
    spdlog::error("ClusterServerCredentials: SetAuthMetadataProcessor ignored");
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    grpc_server_credentials* creds = nullptr;
    if (security_.tls()) {
      grpc_ssl_pem_key_cert_pair pair{security_.tls_key_pem.c_str(),
                                      security_.tls_cert_pem.c_str()};
      creds = grpc_ssl_server_credentials_create_ex(
          security_.tls_ca_pem.c_str(), &pair, 1,
          GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY, nullptr);
    } else {
      creds = grpc_insecure_server_credentials_create();
    }
    if (creds == nullptr) return 0;
    if (!security_.token.empty()) {
      auto* check = new TokenCheck{
          absl::StrCat(kBearer, security_.token), security_.on_refusal, {}};
      grpc_server_credentials_set_auth_metadata_processor(
          creds, {&ProcessToken, &DestroyTokenCheck, check});
    }
    const int port = grpc_server_add_http2_port(server, addr.c_str(), creds);
    grpc_server_credentials_release(creds);
    return port;
  }

  const ClusterSecurity security_;
};

// Adds "authorization: Bearer TOKEN" to every call's initial metadata.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(std::shared_ptr<const std::string> header)
      : header_(std::move(header)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kTokenMetadataKey, *header_);
    }
    methods->Proceed();
  }

 private:
  const std::shared_ptr<const std::string> header_;
};

class TokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token)
      : header_(std::make_shared<const std::string>(absl::StrCat(kBearer, token))) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(header_);
  }

 private:
  const std::shared_ptr<const std::string> header_;
};

}  // namespace

void SetClusterSecurity(ClusterSecurity security) {
  ProcessSecurity() = std::move(security);
}

const ClusterSecurity& GetClusterSecurity() { return ProcessSecurity(); }

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = diff | static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

absl::StatusOr<std::string> ValidateToken(std::string token, absl::string_view source) {
  token = std::string(absl::StripAsciiWhitespace(token));
  if (token.size() < kMinTokenChars || token.size() > kMaxTokenChars) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the token must have ",
                                                   kMinTokenChars, " to ", kMaxTokenChars,
                                                   " characters, it has ", token.size()));
  }
  for (char c : token) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": the token may hold printable ASCII without spaces only"));
    }
  }
  return token;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string content(kMaxTokenChars + 64, '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  content.resize(static_cast<size_t>(in.gcount()));
  return ValidateToken(std::move(content), path);
}

absl::StatusOr<std::string> RandomToken() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char bytes[32];
  if (!in.read(reinterpret_cast<char*>(bytes), sizeof(bytes))) {
    return absl::UnavailableError("cannot read 32 bytes from /dev/urandom");
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

std::shared_ptr<grpc::Channel> MakeSecureChannel(const std::string& target,
                                                 grpc::ChannelArguments args,
                                                 const ClusterSecurity& security,
                                                 TokenOn token_on) {
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (security.tls()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = security.tls_ca_pem;
    ssl.pem_private_key = security.tls_key_pem;
    ssl.pem_cert_chain = security.tls_cert_pem;
    creds = grpc::SslCredentials(ssl);
    args.SetSslTargetNameOverride(kClusterTlsName);
  }
  if (security.token.empty() || token_on == TokenOn::kCallerAdds) {
    return grpc::CreateCustomChannel(target, creds, args);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(std::make_unique<TokenInterceptorFactory>(security.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, args,
                                                                 std::move(interceptors));
}

void AddClusterToken(grpc::ClientContext* ctx) {
  const std::string& token = GetClusterSecurity().token;
  if (!token.empty()) ctx->AddMetadata(kTokenMetadataKey, absl::StrCat(kBearer, token));
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(
    const ClusterSecurity& security) {
  if (security.token.empty() && !security.tls()) {
    return grpc::InsecureServerCredentials();
  }
  return std::make_shared<ClusterServerCredentials>(security);
}

}  // namespace gradsync
