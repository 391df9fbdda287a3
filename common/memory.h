// Process-wide allocator settings for daemons that move large tensors.
#ifndef GRADSYNC_COMMON_MEMORY_H_
#define GRADSYNC_COMMON_MEMORY_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/env.h"

namespace gradsync {

// Makes glibc malloc serve and keep buffers of up to 256 MiB from its heaps
// instead of mmap-ing a fresh mapping for each one and unmapping it on free.
// gRPC allocates a new buffer for every received message; with glibc's
// defaults a 1 MiB one is a fresh mmap, so every received byte costs a page
// fault (a quarter of the ring's CPU time on loopback, measured with perf;
// docs/architecture.md "Send blocks"). Freed memory stays in the process up
// to its peak use. Call once at the start of main(), before threads start.
void TuneAllocatorForLargeBuffers();

// The memory this process may use: the smaller of its cgroup's limit (v2
// memory.max or v1 memory.limit_in_bytes, as the texts of those files; ""
// when absent; "max" or v1's huge "no limit" values count as none) and the
// machine's `physical` bytes. Inside a container the cgroup's limit is the
// container's.
int64_t ParseMemoryLimit(absl::string_view cgroup_v2_max,
                         absl::string_view cgroup_v1_limit, int64_t physical);
// ParseMemoryLimit over this machine's files (/sys/fs/cgroup/memory.max,
// /sys/fs/cgroup/memory/memory.limit_in_bytes) and physical memory.
int64_t MemoryThisProcessMayUse(const Env& env);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_MEMORY_H_
