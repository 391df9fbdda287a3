// One cpp-httplib server on a thread of its own, apart from the gRPC server:
// the /metrics endpoint (metrics_server.h) and the coordinator's dashboard
// (server/coordinator/dashboard_server.h) each run one. Routes are added to
// server() before Start; handlers run on the listener's own thread pool.
//
// A bounded front. Debian's cpp-httplib 0.11.4 reads a request line, its
// headers and its body into memory with no limit, before any handler (and so
// before any auth check) runs, and one slow client holds a thread for as long
// as it trickles bytes. The listener therefore serves each connection itself
// (httplib's documented extension point, process_and_close_socket, which
// httplib's SSL server overrides too) through a stream of its own that
//   - delivers at most kHttpMaxHeadBytes + the payload limit (httplib's
//     set_payload_max_length; kHttpDefaultMaxBodyBytes unless raised) per
//     request: past that the request is answered 431 and the connection
//     closed, so a client cannot make the daemon buffer more than that;
//   - gives each request the read timeout (httplib's set_read_timeout;
//     kHttpDefaultRequestTimeout) from its first byte to its last, not per
//     recv, so trickling a byte now and then does not keep a request alive
//     (408, closed);
//   - waits for a first request at most the read timeout after accept, and
//     for the next one on a keep-alive connection at most the keep-alive
//     timeout (set_keep_alive_timeout);
// and caps the connections it serves at once at `threads`: when a connection
// arrives and every thread is taken, the connection that has waited longest
// for its current request is closed (counted in Stats::evicted), so slow
// clients cannot starve a real one. Methods and routes stay httplib's.
#ifndef GRADSYNC_COMMON_METRICS_HTTP_LISTENER_H_
#define GRADSYNC_COMMON_METRICS_HTTP_LISTENER_H_

#include <atomic>
#include <cstdint>
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

class BoundedHttpServer;

// A request's line and headers together: more is refused (431).
inline constexpr size_t kHttpMaxHeadBytes = 16 * 1024;
// A request body, unless the server raises it (our routes are GETs).
inline constexpr size_t kHttpDefaultMaxBodyBytes = 4 * 1024;
// First byte to last byte of a request (and accept to first request).
inline constexpr int kHttpDefaultRequestTimeoutSeconds = 5;

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
  httplib::Server* server();

  // What the bounded front refused, since Start (for tests and soaks; still
  // readable after Stop).
  struct Stats {
    uint64_t too_large = 0;  // requests past the byte limit (431 or 413)
    uint64_t timed_out = 0;  // requests not complete within the read timeout
    uint64_t evicted = 0;    // connections closed to make room for a new one
    uint64_t served = 0;     // requests answered (any status)
  };
  Stats stats() const;

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
  std::unique_ptr<BoundedHttpServer> server_;
  Stats stopped_stats_;                // stats() after Stop
  std::atomic<bool> finished_{false};  // the serving thread has returned
  std::thread thread_;
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_METRICS_HTTP_LISTENER_H_
