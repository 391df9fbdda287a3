// Presenting jobs: the results JSON, the comparison table, live progress.
#ifndef GRADSYNC_CLIENT_REPORT_H_
#define GRADSYNC_CLIENT_REPORT_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/spec/job_spec.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// A job's failure as "CODE: message" (e.g. "UNAVAILABLE: worker w2 (rank 2,
// ...) lost: ..."); empty when the job has none. The one place a job error is
// turned into text.
std::string JobErrorText(const v1::Job& job);

// The name of a job's error_code ("UNAVAILABLE"; "OK" when it has none).
std::string JobErrorCodeName(const v1::Job& job);

// One job as a results-file entry (keys documented in docs/user-guide.md "Results format"):
// "error" is the plain message, "error_code" the code's name.
nlohmann::json JobToJson(const v1::Job& job);

// One line on what a job's data path ran, once its results are in: an
// allreduce job's algorithm per bucket and why ("allreduce: bucket 0 hd
// (1.1 MB), bucket 1 rd (4.0 KB); auto: the workers' table"), a PS job's
// partitions ("ps: 15 partitions of 64 KiB over 1 shard, picked"). Empty
// before results, and for benches.
std::string HowItSynchronised(const v1::Job& job);

// Comparison table of finished jobs plus a few lines on who won and why.
std::string CompareTable(const std::vector<v1::Job>& jobs);

// One line for an event; empty for events not worth a line.
std::string EventLine(const v1::JobEvent& ev, const std::string& label);

}  // namespace gradsync

#endif  // GRADSYNC_CLIENT_REPORT_H_
