// The client side of `--trace`: one Chrome trace per job, merged from the
// ranks' timelines (JobResult.traces), for Perfetto / chrome://tracing.
#ifndef GRADSYNC_CLIENT_TRACE_JSON_H_
#define GRADSYNC_CLIENT_TRACE_JSON_H_

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}:
// "X" complete events ("i" instant events), pid = rank, tid = thread
// (0 training, 1 copy, 2 sync), process_name "rank r (worker id)" and
// thread_name metadata; ts in microseconds since the job's first event (one
// offset for all ranks, so cross-rank order is kept); args step / bucket /
// layer where set. Display names carry the bucket (" b2") and layer (" L1").
nlohmann::json MergedTrace(const v1::Job& job);

// Writes MergedTrace(job) to `path`. INVALID_ARGUMENT when the job has no
// traces (not traced, or listed rather than fetched), UNAVAILABLE when the
// file cannot be written.
absl::Status WriteTrace(const v1::Job& job, const std::string& path);

// The --trace_file rule: `flag` as given for one job; empty: trace-<id>.json;
// for one of several jobs, "-<id>" goes before a trailing ".json".
std::string TracePath(const std::string& flag, const std::string& job_id,
                      bool several_jobs);

}  // namespace gradsync

#endif  // GRADSYNC_CLIENT_TRACE_JSON_H_
