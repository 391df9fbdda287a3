// The coordinator's dashboard: an HTML page and its JSON, served over HTTP on
// a listener of its own (--dashboard_listen), apart from the gRPC port and
// from /metrics. docs/operations.md "Dashboard" is the user's view.
//
//   GET /                 the page (HTML, JS and CSS embedded in the binary:
//   GET /assets/NAME      dashboard_assets.h; the chart library is uPlot,
//                         third_party/uplot)
//   GET /api/overview     jobs, queue and workers (dashboard_json.h)
//   GET /api/jobs/ID      one job with its curves and per-rank progress
//
// Authentication (when the cluster has a token): every request must carry
//   1. `Authorization: Bearer TOKEN` (scripts, curl), or
//   2. the cookie that `?token=TOKEN` on any page sets: the server answers
//      such a request with 303 to the same path without the query and
//      `Set-Cookie: gradsync_dashboard=V; HttpOnly; SameSite=Strict;
//      Path=/`, V = hex SHA-256 of "gradsync-dashboard\n" TOKEN, so the
//      token leaves the address bar and the cookie is not the token (it
//      opens the dashboard, not the gRPC ports).
// Anything else is 401 (JSON for /api/, a short HTML page otherwise). The
// dashboard only reads; it cannot submit or cancel.
//
// The page polls /api/overview and the shown jobs once a second. The server
// keeps no per-client state: what a request costs is a copy of the job
// table's bounded curves (job_curves.h), so a page left open for hours grows
// nothing on the server.
//
// Threading: requests run on the listener's threads (kDashboardThreads) and
// call the DashboardSource concurrently. Start once, Stop once.
#ifndef GRADSYNC_SERVER_COORDINATOR_DASHBOARD_SERVER_H_
#define GRADSYNC_SERVER_COORDINATOR_DASHBOARD_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics/http_listener.h"
#include "server/coordinator/job_curves.h"

namespace gradsync {

// Requests served at once (each open keep-alive connection holds one for up
// to kDashboardKeepAliveSeconds).
inline constexpr int kDashboardThreads = 8;
inline constexpr int kDashboardKeepAliveSeconds = 2;
// Ended jobs in /api/overview (the newest ones; queued and running jobs are
// always listed). GET /api/jobs/ID reaches every job the coordinator keeps.
inline constexpr size_t kDashboardEndedJobs = 100;
inline constexpr char kDashboardCookie[] = "gradsync_dashboard";

// What the dashboard reads; the Coordinator implements it. Called from the
// dashboard's threads, concurrently.
class DashboardSource {
 public:
  virtual ~DashboardSource() = default;
  // Jobs (at most `max_ended` ended ones, the newest), workers, shards.
  virtual ClusterLive DashboardOverview(size_t max_ended) = 0;
  // NOT_FOUND for an unknown job.
  virtual absl::StatusOr<JobLive> DashboardJob(const std::string& id) = 0;
};

struct DashboardOptions {
  // The cluster token; empty: no authentication (--auth=none).
  std::string token;
};

// The cookie value that proves knowledge of `token` (see top).
std::string DashboardCookieValue(absl::string_view token);

class DashboardServer {
 public:
  // `source` must outlive the server.
  DashboardServer(DashboardSource* source, DashboardOptions options);
  ~DashboardServer();
  DashboardServer(const DashboardServer&) = delete;
  DashboardServer& operator=(const DashboardServer&) = delete;

  // HttpListener::Start's contract: the bound "HOST:PORT", INVALID_ARGUMENT
  // for a malformed address, UNAVAILABLE when it cannot be bound.
  absl::StatusOr<std::string> Start(const std::string& listen, absl::Time deadline);
  // Idempotent; requests in progress finish first.
  void Stop();

 private:
  void AddRoutes();

  // Constant after construction.
  DashboardSource* const source_;
  const DashboardOptions options_;
  const std::string cookie_value_;  // DashboardCookieValue(token)
  std::unique_ptr<HttpListener> listener_;
};

// Starts `server` on `listen` (nothing when empty; waits at most 5 s) and
// announces it on stdout as "dashboard at http://HOST:PORT/".
absl::Status StartDashboardEndpoint(DashboardServer* server, const std::string& listen);

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_DASHBOARD_SERVER_H_
