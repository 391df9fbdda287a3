// The real clock: the real Env.
#include "server/coordinator/clock.h"

namespace gradsync {

const Clock* SystemClock() { return Env::Default(); }

}  // namespace gradsync
