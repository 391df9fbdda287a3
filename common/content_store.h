// A directory of files named by the SHA-256 of their content: the
// coordinator's uploaded blobs (TorchScript models) and each worker's cache
// of the blobs it fetched. A file appears under its final name only once
// all of it is written, synced and checked against its hash, so a reader
// never sees half a file, whoever was killed while writing.
#ifndef GRADSYNC_COMMON_CONTENT_STORE_H_
#define GRADSYNC_COMMON_CONTENT_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"

namespace gradsync {

// SHA-256 of `data` / of a file's content, as 64 lowercase hex digits. The
// file is read through `env` (Env::NewSequentialFile: a regular file only,
// its errors); DATA_LOSS naming the file when a read fails.
std::string Sha256Hex(absl::string_view data);
absl::StatusOr<std::string> Sha256OfFile(const std::string& path,
                                         const Env* env = Env::Default());

// The data of one BlobChunk message (Coordinator.PutBlob / GetBlob).
inline constexpr size_t kBlobChunkBytes = 1 << 20;

struct ContentInfo {
  std::string sha256;
  uint64_t size = 0;
};

// Thread-safe: writers write temporaries of their own; the final rename is
// atomic, and two writers of the same content rename the same bytes.
class ContentStore {
 public:
  // Creates `dir` (and its parents) if missing and removes the temporaries
  // that processes no longer alive left there.
  static absl::StatusOr<std::unique_ptr<ContentStore>> Open(std::string dir);

  const std::string& dir() const { return dir_; }

  // The path of the file with this hash; NOT_FOUND when there is none,
  // INVALID_ARGUMENT when `sha256` is not 64 lowercase hex digits. With
  // `verify`, the content is hashed again and a file that no longer matches
  // is removed (DATA_LOSS).
  absl::StatusOr<std::string> Find(const std::string& sha256, bool verify = false) const;

  // Writes one file in pieces.
  class Writer {
   public:
    ~Writer();  // removes the temporary unless committed
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    // RESOURCE_EXHAUSTED once the content would pass `max_bytes`.
    absl::Status Append(absl::string_view data);
    uint64_t size() const { return size_; }
    // Changes the limit Append enforces (before the content passes it).
    void set_max_bytes(uint64_t max_bytes) { max_bytes_ = max_bytes; }
    // Checks the content against the expected hash and size (when given),
    // syncs it and moves it to its final name. DATA_LOSS on a mismatch
    // (nothing kept). Call once.
    absl::StatusOr<ContentInfo> Commit(const std::string& expected_sha256,
                                       std::optional<uint64_t> expected_size);

   private:
    friend class ContentStore;
    Writer(const ContentStore* store, std::string tmp, int fd, uint64_t max_bytes);
    struct Hash;

    const ContentStore* store_;
    std::string tmp_;
    int fd_;
    uint64_t max_bytes_;
    uint64_t size_ = 0;
    std::unique_ptr<Hash> hash_;
    bool done_ = false;
  };
  absl::StatusOr<std::unique_ptr<Writer>> NewWriter(uint64_t max_bytes) const;

  // What the store takes on its disk: the bytes of its files (temporaries
  // included: uploads in progress), and the bytes its file system has
  // free for unprivileged writers.
  struct Usage {
    uint64_t stored = 0;
    uint64_t available = 0;
  };
  absl::StatusOr<Usage> Measure() const;

 private:
  explicit ContentStore(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_CONTENT_STORE_H_
