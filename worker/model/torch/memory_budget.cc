#include "worker/model/torch/memory_budget.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

constexpr size_t kAlignment = 64;  // libtorch's own CPU alignment (gAlignment)

std::string MiB(int64_t bytes) {
  return absl::StrCat(bytes / (int64_t{1} << 20), " MiB");
}

// Allocates as libtorch's default CPU allocator does (posix_memalign, 64
// bytes), and counts each block by its usable size from allocation to
// free, so the deleter needs no table. The data pointer is the context, so
// libtorch's raw_allocate/raw_deallocate work on it as on the default.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const override {
    if (n == 0) return {nullptr, nullptr, &Delete, c10::Device(c10::DeviceType::CPU)};
    const int64_t limit = limit_.load(std::memory_order_relaxed);
    if (limit > 0 &&
        in_use_.load(std::memory_order_relaxed) + static_cast<int64_t>(n) > limit) {
      C10_THROW_ERROR(
          OutOfMemoryError,
          absl::StrCat("out of memory: a tensor of ", MiB(n), " would take the job's ",
                       "tensors past its limit (gradsync-worker --max_job_memory: ",
                       MiB(limit - baseline_.load()), " beyond the ",
                       MiB(baseline_.load()), " held when it started)"));
    }
    void* p = nullptr;
    if (posix_memalign(&p, kAlignment, n) != 0 || p == nullptr) {
      C10_THROW_ERROR(
          OutOfMemoryError,
          absl::StrCat("out of memory: allocating a tensor of ", MiB(n), " failed"));
    }
    in_use_.fetch_add(static_cast<int64_t>(malloc_usable_size(p)),
                      std::memory_order_relaxed);
    return {p, p, &Delete, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

  static void Delete(void* p) {
    if (p == nullptr) return;
    in_use_.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)),
                      std::memory_order_relaxed);
    std::free(p);
  }

  static void SetLimit(int64_t max_bytes) {
    const int64_t now = in_use_.load();
    baseline_.store(now);
    limit_.store(max_bytes > 0 ? now + max_bytes : 0);
  }
  static int64_t InUse() { return in_use_.load(); }

 private:
  static std::atomic<int64_t> in_use_;
  static std::atomic<int64_t> baseline_;
  static std::atomic<int64_t> limit_;  // absolute; 0: none
};

std::atomic<int64_t> CountingCpuAllocator::in_use_{0};
std::atomic<int64_t> CountingCpuAllocator::baseline_{0};
std::atomic<int64_t> CountingCpuAllocator::limit_{0};

std::atomic<bool> g_installed{false};

}  // namespace

void SetTorchMemoryLimit(int64_t max_bytes) {
  if (max_bytes <= 0 && !g_installed.load()) return;  // libtorch's own, uncounted
  // Static lifetime: tensors outlive any job (SetCPUAllocator does not own).
  static CountingCpuAllocator counting;
  if (!g_installed.exchange(true)) {
    c10::SetCPUAllocator(&counting, /*priority=*/1);
    if (c10::GetCPUAllocator() != &counting) {
      spdlog::warn(
          "libtorch kept another CPU allocator: --max_job_memory cannot bound "
          "TorchScript "
          "jobs' tensors in this build");
    }
  }
  CountingCpuAllocator::SetLimit(max_bytes);
}

void RestoreLibtorchCpuAllocator() {
  if (!g_installed.exchange(false)) return;
  c10::SetCPUAllocator(c10::GetDefaultCPUAllocator(), /*priority=*/1);
}

int64_t TorchMemoryInUse() { return CountingCpuAllocator::InUse(); }

}  // namespace gradsync
