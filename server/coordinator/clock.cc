// The real clock.
#include "server/coordinator/clock.h"

#include "absl/time/clock.h"

namespace gradsync {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

const Clock* SystemClock() {
  static const RealClock* const clock = new RealClock();
  return clock;
}

}  // namespace gradsync
