// Rate-limited warnings about refused calls (UNAUTHENTICATED from the token
// check, PERMISSION_DENIED from the PS and Peer services), so that a flood of
// bad calls cannot flood the log or fill the disk: at most kLines lines per
// kWindow; the count of the lines left out is reported with the first line
// of a later window. Each line names what was refused, the caller's address
// as gRPC gives it (ServerContext::peer(), e.g. "ipv4:10.0.0.7:51234") and
// why; each of the three is cut at 200 characters, and bytes that are not
// printable ASCII are written as \xHH, since it may carry what the caller
// sent.
//
// Thread-safe. One log per service that refuses calls: a flood at one does
// not hide the refusals of another.
#ifndef GRADSYNC_COMMON_GRPC_REFUSAL_LOG_H_
#define GRADSYNC_COMMON_GRPC_REFUSAL_LOG_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"

namespace gradsync {

class RefusalLog {
 public:
  static constexpr int kLines = 10;
  static constexpr absl::Duration kWindow = absl::Seconds(10);

  // `env`: the clock of the windows (not owned; outlives the log).
  explicit RefusalLog(const Env* env) : env_(env) {}
  RefusalLog() : RefusalLog(Env::Default()) {}

  // Logs "refused WHAT from PEER: WHY" at warn level, unless this window's
  // lines are spent (then it is only counted).
  void Refused(absl::string_view what, absl::string_view peer, absl::string_view why);

  // What Refused logs when it is called at `now`: the line, or nullopt when
  // it is left out (and counted). Refused without the logger, for tests.
  std::optional<std::string> Line(absl::string_view what, absl::string_view peer,
                                  absl::string_view why, absl::Time now);

 private:
  const Env* const env_;
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int lines_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_GRPC_REFUSAL_LOG_H_
