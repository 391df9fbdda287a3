#include "common/metrics/http_listener.h"

#include <httplib.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/metrics/metrics_server.h"

namespace gradsync {

HttpListener::HttpListener(int threads, std::string what, const Env* env)
    : what_(std::move(what)), env_(env), server_(std::make_unique<httplib::Server>()) {
  // httplib owns the queue it gets from this factory.
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // httplib's default sets SO_REUSEPORT, with which a second daemon could
  // bind the same port and take half the requests: only SO_REUSEADDR here
  // (a restart may bind at once; a port in use is an error).
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

HttpListener::~HttpListener() { Stop(); }

// 1. parse and bind (failures are reported, nothing is left running);
// 2. serve on a thread of our own;
// 3. wait until httplib says it is serving (see Stop).
absl::StatusOr<std::string> HttpListener::Start(const std::string& listen,
                                                absl::Time deadline) {
  absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(listen);
  if (!hp.ok()) return hp.status();
  auto [host, port] = *hp;
  const bool bound = port == 0 ? (port = server_->bind_to_any_port(host)) > 0
                               : server_->bind_to_port(host, port);
  if (!bound) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat(what_, ": cannot listen on ", listen,
                                               " (address in use or not local?)"));
  }
  httplib::Server* s = server_.get();
  thread_ = std::thread([this, s] {
    s->listen_after_bind();
    finished_ = true;
  });
  while (!server_->is_running() && !finished_) {
    if (env_->Now() > deadline) {
      return absl::UnavailableError(
          absl::StrCat(what_, ": server on ", listen, " did not start in time"));
    }
    env_->SleepFor(absl::Milliseconds(1));
  }
  if (finished_) {
    return absl::UnavailableError(
        absl::StrCat(what_, ": server on ", listen, " stopped at start"));
  }
  const std::string shown =
      host.find(':') == std::string::npos ? host : absl::StrCat("[", host, "]");
  return absl::StrCat(shown, ":", port);
}

// httplib's stop() does nothing before listen_after_bind has begun serving
// (Start waits for that, unless it gave up at its deadline), and must be
// called once only: wait until it serves or has ended, then stop it once.
void HttpListener::Stop() {
  if (server_ == nullptr) return;
  if (thread_.joinable()) {
    while (!server_->is_running() && !finished_) {
      env_->SleepFor(absl::Milliseconds(1));
    }
    if (!finished_) server_->stop();
    thread_.join();
  }
  server_.reset();
}

}  // namespace gradsync
