// Helpers shared by coordinator.cc (RPCs, sessions, threads) and
// coordinator_jobs.cc (scheduling and the job life cycle). Internal.
#ifndef GRADSYNC_SERVER_COORDINATOR_COORDINATOR_INTERNAL_H_
#define GRADSYNC_SERVER_COORDINATOR_COORDINATOR_INTERNAL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {
namespace coordinator_internal {

inline int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// How long a rank's network-looking error waits for the root cause (a lost
// worker) to surface before it becomes the job's error.
inline constexpr absl::Duration kSymptomGrace = absl::Milliseconds(1500);

inline bool LooksLikeSymptom(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable ||
         code == absl::StatusCode::kCancelled ||
         code == absl::StatusCode::kAborted ||
         code == absl::StatusCode::kDeadlineExceeded;
}

inline bool Terminal(v1::JobState s) {
  return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED;
}

inline std::string Tag(const std::string& job_id) {
  return absl::StrCat("[job ", job_id, "] ");
}

}  // namespace coordinator_internal
}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_COORDINATOR_INTERNAL_H_
