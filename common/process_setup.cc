#include "common/process_setup.h"

#include "absl/synchronization/mutex.h"
#include "common/float_env.h"
#include "common/memory.h"

namespace gradsync {

void PrepareDaemonProcess() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  TuneAllocatorForLargeBuffers();
  FlushDenormalsToZero();
}

}  // namespace gradsync
