// The data sets a worker keeps in memory between jobs (Fashion-MNIST,
// uploaded and on-worker tensor files), within a byte budget: a job's data
// set is loaded once and reused by the next job that names it, but jobs that
// name ever new data sets cannot grow the worker without bound (issue 51:
// three small files grew one from 318 MiB to 1.9 GiB). Least recently used
// entries go first; a data set larger than the whole budget is used by its
// job and not kept. An entry dropped here lives on while a job holds it.
#ifndef GRADSYNC_WORKER_DATA_CACHE_H_
#define GRADSYNC_WORKER_DATA_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/model/dataset.h"

namespace gradsync {

// Bytes a Dataset holds (its inputs and labels).
int64_t DatasetBytes(const Dataset& d);

// Thread-safe.
class DataCache {
 public:
  explicit DataCache(int64_t budget_bytes) : budget_(budget_bytes) {}

  // The data set under `key`, marked used now; null when not kept.
  std::shared_ptr<const Dataset> Get(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps `d` under `key` (replacing what was there), then drops the least
  // recently used others until the total fits the budget; keeps nothing when
  // `d` alone exceeds it.
  void Put(const std::string& key, std::shared_ptr<const Dataset> d)
      ABSL_LOCKS_EXCLUDED(mu_);

  int64_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t budget() const { return budget_; }
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::shared_ptr<const Dataset> data;
    int64_t bytes = 0;
    uint64_t used = 0;  // tick_ of the last Get or Put
  };
  const int64_t budget_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t tick_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_DATA_CACHE_H_
