// The dashboard's JSON (GET /api/overview, GET /api/jobs/ID; see
// dashboard_server.h and docs/operations.md "Dashboard"). Jobs and workers
// are the wire messages in protobuf's JSON mapping (field names as in
// gradsync.proto, enums by name, 64-bit integers as strings, every field
// present); curves are columns of numbers, one array per field, as charting
// libraries take them. A number that is not finite is written as null.
#ifndef GRADSYNC_SERVER_COORDINATOR_DASHBOARD_JSON_H_
#define GRADSYNC_SERVER_COORDINATOR_DASHBOARD_JSON_H_

#include <string>

#include "absl/strings/string_view.h"
#include "server/coordinator/job_curves.h"

namespace gradsync {

// {"now_ms", "ps_shards", "workers": [WorkerInfo], "jobs": [{"job": Job,
//  "latest": curve point or null}]}
std::string OverviewJson(const ClusterLive& cluster);

// {"job": Job, "curve_stride", "curve": {column: [...]}, "accuracy": {column:
//  [...]}, "ranks": [{"rank", "worker_id", "host", "updated_ms", "step",
//  "epoch", "loss", "samples_per_second", "comm_seconds", "compute_seconds",
//  "stall"}]}
std::string JobJson(const JobLive& job);

// `s` as a JSON string literal, quotes included ('<' and '>' escaped too, so
// the text is safe inside HTML).
std::string JsonQuote(absl::string_view s);

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_DASHBOARD_JSON_H_
