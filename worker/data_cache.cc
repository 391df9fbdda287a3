#include "worker/data_cache.h"

#include <utility>

namespace gradsync {

int64_t DatasetBytes(const Dataset& d) {
  return static_cast<int64_t>(d.images.size() * sizeof(float) + d.labels.size());
}

std::shared_ptr<const Dataset> DataCache::Get(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  it->second.used = ++tick_;
  return it->second.data;
}

void DataCache::Put(const std::string& key, std::shared_ptr<const Dataset> d) {
  if (d == nullptr) return;
  const int64_t bytes = DatasetBytes(*d);
  absl::MutexLock lock(&mu_);
  auto old = entries_.find(key);
  if (old != entries_.end()) {
    bytes_ -= old->second.bytes;
    entries_.erase(old);
  }
  if (bytes > budget_) return;
  entries_[key] = Entry{std::move(d), bytes, ++tick_};
  bytes_ += bytes;
  while (bytes_ > budget_) {
    auto lru = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first != key &&
          (lru == entries_.end() || it->second.used < lru->second.used)) {
        lru = it;
      }
    }
    if (lru == entries_.end()) break;  // only `key` left, and it fits
    bytes_ -= lru->second.bytes;
    entries_.erase(lru);
  }
}

int64_t DataCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

size_t DataCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace gradsync
