// Presenting jobs: the results JSON, the comparison table, live progress.
#ifndef GRADSYNC_CLIENT_REPORT_H_
#define GRADSYNC_CLIENT_REPORT_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/spec/job_spec.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// One job as a results-file entry (keys documented in README "Results").
nlohmann::json JobToJson(const v1::Job& job);

// Comparison table of finished jobs plus a few lines on who won and why.
std::string CompareTable(const std::vector<v1::Job>& jobs);

// One line for an event; empty for events not worth a line.
std::string EventLine(const v1::JobEvent& ev, const std::string& label);

}  // namespace gradsync

#endif  // GRADSYNC_CLIENT_REPORT_H_
