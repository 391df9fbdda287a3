// The coordinator's source of time is the Env (common/env.h) the worker and
// the PS use too, so that the job table's timing rules (symptom grace, wall
// seconds, timestamps) are tested on a FakeEnv (common/testing/fake_env.h)
// without sleeping. `Clock` is the coordinator's name for it.
#ifndef GRADSYNC_SERVER_COORDINATOR_CLOCK_H_
#define GRADSYNC_SERVER_COORDINATOR_CLOCK_H_

#include "common/env.h"

namespace gradsync {

using Clock = Env;

// Env::Default(). Never destroyed.
const Clock* SystemClock();

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_CLOCK_H_
