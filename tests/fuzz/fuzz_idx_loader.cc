// libFuzzer target: LoadFashionMnist over arbitrary IDX files.
//
// Input layout: 2 bytes big-endian L, then L bytes of the image file, then the
// label file (L is clamped to what is there). Both are written uncompressed
// into a per-process temp dir (created once with mkdtemp) as
// train-images-idx3-ubyte / train-labels-idx1-ubyte, and the loader runs with
// limit 64. On success every pixel and label is read. Errors are fine; crashes,
// out-of-bounds reads and unbounded allocations (-rss_limit_mb) are not.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "worker/model/dataset.h"

namespace {

const std::string& TempDir() {
  static const std::string* dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(base && *base ? base : "/tmp") + "/gradsync_fuzz_idx_XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    auto* d = new std::string(tmpl);
    // Best-effort cleanup when the fuzzer exits normally.
    static std::string cleanup = *d;
    std::atexit([] {
      std::remove((cleanup + "/train-images-idx3-ubyte").c_str());
      std::remove((cleanup + "/train-labels-idx1-ubyte").c_str());
      rmdir(cleanup.c_str());
    });
    return d;
  }();
  return *dir;
}

void WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    std::perror(path.c_str());
    std::abort();
  }
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  size_t images_len = (size_t{data[0]} << 8) | data[1];
  data += 2;
  size -= 2;
  if (images_len > size) images_len = size;
  const std::string& dir = TempDir();
  WriteFile(dir + "/train-images-idx3-ubyte", data, images_len);
  WriteFile(dir + "/train-labels-idx1-ubyte", data + images_len, size - images_len);

  absl::StatusOr<gradsync::Dataset> ds =
      gradsync::LoadFashionMnist(dir, /*train=*/true, /*limit=*/64);
  if (!ds.ok()) return 0;
  if (ds->n < 0 || ds->n > 64 || ds->features < 1) __builtin_trap();
  if (ds->images.size() != static_cast<size_t>(ds->n) * ds->features ||
      ds->labels.size() != static_cast<size_t>(ds->n)) {
    __builtin_trap();
  }
  float sum = 0;
  for (int64_t i = 0; i < ds->n; ++i) {
    const float* img = ds->image(i);
    for (int j = 0; j < ds->features; ++j) sum += img[j];
    if (ds->labels[i] >= ds->classes) __builtin_trap();
  }
  if (!(sum >= 0)) __builtin_trap();  // pixels are in [0, 1]
  return 0;
}
