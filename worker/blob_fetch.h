// Fetching the blobs a job names (its TorchScript model) from the
// coordinator into the worker's cache (--cache_dir), by content hash: a
// second job with the same model does not fetch it again.
#ifndef GRADSYNC_WORKER_BLOB_FETCH_H_
#define GRADSYNC_WORKER_BLOB_FETCH_H_

#include <atomic>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/content_store.h"
#include "common/env.h"

namespace gradsync {

struct BlobFetchOptions {
  std::string coordinator;  // HOST:PORT
  absl::Duration timeout = absl::Minutes(5);
  const std::atomic<bool>* cancelled = nullptr;  // checked between chunks
  const Env* env = nullptr;
};

// The path of blob `sha256` in `cache`: the cached file when it is there and
// still hashes to its name, else fetched with Coordinator.GetBlob, checked
// against the hash (DATA_LOSS, nothing kept, on a mismatch) and stored.
// The coordinator's status (NOT_FOUND, UNAVAILABLE, DEADLINE_EXCEEDED ...)
// when the fetch fails; CANCELLED when `cancelled` became true.
absl::StatusOr<std::string> FetchBlob(const std::string& sha256, ContentStore* cache,
                                      const BlobFetchOptions& options);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_BLOB_FETCH_H_
