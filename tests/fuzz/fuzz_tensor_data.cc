// libFuzzer target: LoadTensorData (--data=tensors:PATH files) over arbitrary
// bytes, seeded with real torch.save files (make_tensor_seeds.py).
//
// The input is written to a per-process temp file and loaded. On success
// every value and label is read and the shapes are checked against each
// other. Errors are fine; crashes, out-of-bounds reads, undefined behaviour
// and leaks are not.
//
// Memory: libtorch's reader trusts the sizes a file declares (a 2 KB file
// can ask for 24 GB), which is why workers read these files first in a
// helper process under RLIMIT_AS (worker/torch_file_check.h), where such an
// allocation fails and c10 throws. The options below make ASan behave like
// that limit: an allocation over 512 MiB returns null instead of reporting,
// so the property fuzzed is the one the helper relies on: the loader turns a
// failed allocation into an error, like every other bad input.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "worker/model/torch/tensor_data.h"

extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1:max_allocation_size_mb=512";
}

// ASan's own operator new reports an allocation it cannot make instead of
// throwing std::bad_alloc, which is what a worker's helper process sees
// under RLIMIT_AS (and what libtorch and the loader must survive). These
// replacements make ASan's malloc (null over max_allocation_size_mb) throw.
void* operator new(std::size_t n) {
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return std::malloc(n ? n : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

// Leaks inside libtorch (its reader leaves a few hundred bytes behind on
// some malformed files) are not gradsync's to fix; leaks in our code are
// still reported.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libtorch_cpu.so\nleak:libc10.so\n";
}

namespace {

const std::string& TempFile() {
  static const std::string* file = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(base && *base ? base : "/tmp") + "/gradsync_fuzz_tensors_XXXXXX";
    const int fd = mkstemp(tmpl.data());
    if (fd < 0) {
      std::perror("mkstemp");
      std::abort();
    }
    close(fd);
    auto* f = new std::string(tmpl);
    static std::string cleanup = *f;
    std::atexit([] { std::remove(cleanup.c_str()); });
    return f;
  }();
  return *file;
}

void Check(const gradsync::Dataset& d) {
  if (d.n < 1 || d.features < 1 || d.classes < 1 || d.classes > 256) __builtin_trap();
  if (d.images.size() != static_cast<size_t>(d.n) * static_cast<size_t>(d.features) ||
      d.labels.size() != static_cast<size_t>(d.n)) {
    __builtin_trap();
  }
  float sum = 0;
  for (float v : d.images) sum += v;  // reads every value (NaN is allowed)
  for (uint8_t y : d.labels) {
    if (y >= d.classes) __builtin_trap();
  }
  (void)sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = TempFile();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  absl::StatusOr<gradsync::TensorData> d = gradsync::LoadTensorData(path);
  if (!d.ok()) {
    if (d.status().message().find(path) == std::string::npos) __builtin_trap();
    return 0;
  }
  Check(d->train);
  Check(d->test);
  if (d->train.features != d->test.features) __builtin_trap();
  return 0;
}
