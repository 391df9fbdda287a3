#include "common/memory.h"

#include <malloc.h>

namespace gradsync {

void TuneAllocatorForLargeBuffers() {
  constexpr int kMmapThreshold = 256 << 20;
  constexpr int kTrimThreshold = 512 << 20;
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);  // also fixes the dynamic threshold
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
  // One arena: glibc unmaps a per-thread arena's heap as soon as it is empty,
  // which undoes the two settings above for buffers that gRPC's threads
  // allocate; the main arena honours them.
  mallopt(M_ARENA_MAX, 1);
}

}  // namespace gradsync
