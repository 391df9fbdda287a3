// spdlog set-up shared by the daemons and the CLI.
#ifndef GRADSYNC_COMMON_LOGGING_H_
#define GRADSYNC_COMMON_LOGGING_H_

#include <string>

#include "absl/status/status.h"

namespace gradsync {

// Sets the default spdlog logger to stderr with `process` in each line's
// prefix and the given level ("trace", "debug", "info", "warn", "error",
// "off"). INVALID_ARGUMENT for an unknown level.
absl::Status InitLogging(const std::string& process, const std::string& level);

// "[job j-3 rank 1] " style tag that job-scoped log lines start with.
std::string JobTag(const std::string& job_id, int rank);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_LOGGING_H_
