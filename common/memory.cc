#include "common/memory.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

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

namespace {

// A limit file's bytes; 0 for none ("max", empty, unreadable, or v1's
// "unlimited" of about 2^63 rounded to a page).
int64_t LimitOf(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  int64_t v = 0;
  if (text.empty() || text == "max" || !absl::SimpleAtoi(text, &v) || v <= 0) return 0;
  if (v >= (int64_t{1} << 62)) return 0;
  return v;
}

}  // namespace

int64_t ParseMemoryLimit(absl::string_view cgroup_v2_max,
                         absl::string_view cgroup_v1_limit, int64_t physical) {
  int64_t limit = physical > 0 ? physical : 0;
  for (int64_t cg : {LimitOf(cgroup_v2_max), LimitOf(cgroup_v1_limit)}) {
    if (cg > 0) limit = limit > 0 ? std::min(limit, cg) : cg;
  }
  return limit;
}

int64_t MemoryThisProcessMayUse(const Env& env) {
  auto read = [&env](const char* path) {
    absl::StatusOr<std::string> text = env.ReadFileToString(path);
    return text.ok() ? *text : std::string();
  };
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  const int64_t physical = pages > 0 && page > 0
                               ? static_cast<int64_t>(pages) * static_cast<int64_t>(page)
                               : 0;
  return ParseMemoryLimit(read("/sys/fs/cgroup/memory.max"),
                          read("/sys/fs/cgroup/memory/memory.limit_in_bytes"), physical);
}

}  // namespace gradsync
