#include "common/metrics/metrics_server.h"

#include <httplib.h>

#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gradsync {

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  return std::make_pair(host, port);
}

absl::Status StartMetricsEndpoint(MetricsServer* server, const std::string& listen) {
  if (listen.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> at =
      server->Start(listen, server->env()->Now() + absl::Seconds(5));
  if (!at.ok()) return at.status();
  std::cout << "metrics at http://" << *at << "/metrics" << std::endl;
  return absl::OkStatus();
}

MetricsServer::MetricsServer(const MetricsRegistry* registry, const Env* env)
    : registry_(registry), env_(env) {}

MetricsServer::~MetricsServer() { Stop(); }

absl::StatusOr<std::string> MetricsServer::Start(const std::string& listen,
                                                 absl::Time deadline) {
  listener_ = std::make_unique<HttpListener>(kMetricsServerThreads, "metrics", env_);
  const MetricsRegistry* registry = registry_;
  listener_->server()->Get(
      "/metrics", [registry](const httplib::Request&, httplib::Response& res) {
        res.set_content(registry->Render(), "text/plain; version=0.0.4; charset=utf-8");
      });
  return listener_->Start(listen, deadline);
}

void MetricsServer::Stop() {
  if (listener_ != nullptr) listener_->Stop();
}

}  // namespace gradsync
