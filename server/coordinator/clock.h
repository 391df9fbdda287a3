// The coordinator's source of time, injected so that the job table's timing
// rules (symptom grace, wall seconds, timestamps) can be tested without
// sleeping. Like LevelDB's Env::NowMicros, but only the clock.
#ifndef GRADSYNC_SERVER_COORDINATOR_CLOCK_H_
#define GRADSYNC_SERVER_COORDINATOR_CLOCK_H_

#include "absl/time/time.h"

namespace gradsync {

// Thread-safe: Now() may be called from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// absl::Now(). Never destroyed.
const Clock* SystemClock();

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_CLOCK_H_
