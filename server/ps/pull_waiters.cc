#include "server/ps/pull_waiters.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gradsync {

absl::Status PullWaiters::Add(const std::string& key, PendingPull& p) {
  if (count_ >= max_pending_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many pulls wait on this PS shard (", max_pending_, ")"));
  }
  by_key_[key].push_back(std::move(p));
  ++count_;
  return absl::OkStatus();
}

std::vector<PendingPull> PullWaiters::Take(const std::string& key) {
  std::vector<PendingPull> out;
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return out;
  out = std::move(it->second);
  by_key_.erase(it);
  count_ -= out.size();
  return out;
}

std::vector<PendingPull> PullWaiters::TakeIf(
    const std::function<bool(const std::string&)>& match) {
  std::vector<PendingPull> out;
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    if (!match(it->first)) {
      ++it;
      continue;
    }
    for (PendingPull& p : it->second) out.push_back(std::move(p));
    count_ -= it->second.size();
    it = by_key_.erase(it);
  }
  return out;
}

std::optional<PendingPull> PullWaiters::Cancel(uint64_t ticket) {
  for (auto it = by_key_.begin(); it != by_key_.end(); ++it) {
    auto& list = it->second;
    for (auto p = list.begin(); p != list.end(); ++p) {
      if (p->ticket != ticket) continue;
      PendingPull found = std::move(*p);
      list.erase(p);
      --count_;
      if (list.empty()) by_key_.erase(it);
      return found;
    }
  }
  return std::nullopt;
}

std::vector<PendingPull> PullWaiters::Expire(absl::Time now) {
  std::vector<PendingPull> out;
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    auto& list = it->second;
    for (auto p = list.begin(); p != list.end();) {
      if (p->deadline > now) {
        ++p;
        continue;
      }
      out.push_back(std::move(*p));
      p = list.erase(p);
      --count_;
    }
    it = list.empty() ? by_key_.erase(it) : std::next(it);
  }
  return out;
}

size_t PullWaiters::Ranks(const std::string& key) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return 0;
  std::set<int> ranks;
  for (const PendingPull& p : it->second) ranks.insert(p.rank);
  return ranks.size();
}

}  // namespace gradsync
