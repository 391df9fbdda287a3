// The /metrics endpoint of a daemon: GET /metrics answers with the registry's
// text exposition (Content-Type text/plain; version=0.0.4); every other path
// or method gets 404. Served by Debian's cpp-httplib on a small thread pool
// of its own, apart from the gRPC server, so a slow scraper cannot hold up
// training traffic (and the reverse).
#ifndef GRADSYNC_COMMON_METRICS_METRICS_SERVER_H_
#define GRADSYNC_COMMON_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/metrics/http_listener.h"
#include "common/metrics/metrics.h"

namespace gradsync {

// Threads serving scrapes; one scraper at a time is the normal case.
inline constexpr int kMetricsServerThreads = 2;

// Start once, Stop once (the destructor stops too). Start and Stop are not
// thread-safe with each other; rendering runs on the server's own threads.
class MetricsServer {
 public:
  // `registry` and `env` (the clock of Start's deadline) must outlive the
  // server.
  explicit MetricsServer(const MetricsRegistry* registry,
                         const Env* env = Env::Default());
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds HOST:PORT (port 0 picks a free one; HOST may be [v6]) and serves
  // until Stop. Returns the bound "HOST:PORT". INVALID_ARGUMENT for a
  // malformed address; UNAVAILABLE when the address cannot be bound (in
  // use, no such interface) or serving does not begin by `deadline`.
  absl::StatusOr<std::string> Start(const std::string& listen, absl::Time deadline);

  // Stops serving and joins the server thread (a scrape in progress
  // finishes first). Idempotent; a no-op if Start failed before serving.
  void Stop();

  const Env* env() const { return env_; }

 private:
  const MetricsRegistry* const registry_;
  const Env* const env_;
  std::unique_ptr<HttpListener> listener_;
};

// Starts `server` on `listen` (nothing when it is empty) and announces it on
// stdout as "metrics at http://HOST:PORT/metrics" (the local launcher reads
// that line). MetricsServer::Start's errors; waits at most 5 s on the
// server's Env.
absl::Status StartMetricsEndpoint(MetricsServer* server, const std::string& listen);

// Splits "HOST:PORT" ("[::1]:9090" for IPv6). INVALID_ARGUMENT when there is
// no port or it is not a number in [0, 65535].
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_METRICS_METRICS_SERVER_H_
