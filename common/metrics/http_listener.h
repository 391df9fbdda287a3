// One cpp-httplib server on a thread of its own, apart from the gRPC server:
// the /metrics endpoint (metrics_server.h) and the coordinator's dashboard
// (server/coordinator/dashboard_server.h) each run one. Routes are added to
// server() before Start; handlers run on the listener's own thread pool.
#ifndef GRADSYNC_COMMON_METRICS_HTTP_LISTENER_H_
#define GRADSYNC_COMMON_METRICS_HTTP_LISTENER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/env.h"

namespace httplib {
class Server;
}

namespace gradsync {

// Start once, Stop once (the destructor stops too). Start and Stop are not
// thread-safe with each other.
class HttpListener {
 public:
  // `threads`: requests served at once (a keep-alive connection holds one
  // thread while it stays open). `what` names the listener in errors.
  // `env`: the clock of Start's deadline and of the polls in Start and Stop
  // (not owned; outlives the listener).
  HttpListener(int threads, std::string what, const Env* env = Env::Default());
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // The server to add routes to; valid until Stop.
  httplib::Server* server() { return server_.get(); }

  // Binds HOST:PORT (port 0 picks a free one; HOST may be [v6]) and serves
  // until Stop. Returns the bound "HOST:PORT". INVALID_ARGUMENT for a
  // malformed address; UNAVAILABLE when the address cannot be bound (in
  // use, no such interface) or serving does not begin by `deadline`.
  absl::StatusOr<std::string> Start(const std::string& listen, absl::Time deadline);

  // Stops serving and joins the server thread (a request in progress
  // finishes first). Idempotent; a no-op if Start failed before serving.
  void Stop();

 private:
  const std::string what_;
  const Env* const env_;
  std::unique_ptr<httplib::Server> server_;
  std::atomic<bool> finished_{false};  // the serving thread has returned
  std::thread thread_;
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_METRICS_HTTP_LISTENER_H_
