#include "common/metrics/metrics_server.h"

#include <httplib.h>

#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

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
  absl::StatusOr<std::string> at = server->Start(listen, absl::Now() + absl::Seconds(5));
  if (!at.ok()) return at.status();
  std::cout << "metrics at http://" << *at << "/metrics" << std::endl;
  return absl::OkStatus();
}

MetricsServer::MetricsServer(const MetricsRegistry* registry) : registry_(registry) {}

MetricsServer::~MetricsServer() { Stop(); }

// 1. parse and bind (failures are reported, nothing is left running);
// 2. serve on a thread of our own;
// 3. wait until httplib says it is serving (see Stop).
absl::StatusOr<std::string> MetricsServer::Start(const std::string& listen,
                                                 absl::Time deadline) {
  absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(listen);
  if (!hp.ok()) return hp.status();
  auto [host, port] = *hp;
  server_ = std::make_unique<httplib::Server>();
  // httplib owns the queue it gets from this factory.
  server_->new_task_queue = [] { return new httplib::ThreadPool(kMetricsServerThreads); };
  // httplib's default sets SO_REUSEPORT, with which a second daemon could
  // bind the same port and take half the scrapes: only SO_REUSEADDR here
  // (a restart may bind at once; a port in use is an error).
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const MetricsRegistry* registry = registry_;
  server_->Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  const bool bound = port == 0 ? (port = server_->bind_to_any_port(host)) > 0
                               : server_->bind_to_port(host, port);
  if (!bound) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("metrics: cannot listen on ", listen,
                                               " (address in use or not local?)"));
  }
  httplib::Server* s = server_.get();
  thread_ = std::thread([this, s] {
    s->listen_after_bind();
    finished_ = true;
  });
  while (!server_->is_running() && !finished_) {
    if (absl::Now() > deadline) {
      return absl::UnavailableError(
          absl::StrCat("metrics: server on ", listen, " did not start in time"));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  if (finished_) {
    return absl::UnavailableError(
        absl::StrCat("metrics: server on ", listen, " stopped at start"));
  }
  const std::string shown =
      host.find(':') == std::string::npos ? host : absl::StrCat("[", host, "]");
  return absl::StrCat(shown, ":", port);
}

// httplib's stop() does nothing before listen_after_bind has begun serving
// (Start waits for that, unless it gave up at its deadline), and must be
// called once only: wait until it serves or has ended, then stop it once.
void MetricsServer::Stop() {
  if (server_ == nullptr) return;
  if (thread_.joinable()) {
    while (!server_->is_running() && !finished_) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    if (!finished_) server_->stop();
    thread_.join();
  }
  server_.reset();
}

}  // namespace gradsync
