// Pulls a PS shard holds open: for a slice not installed yet (a Pull may come
// before rank 0's Init) and for the final-pull barrier of async jobs.
//
// Bounded: at most `max_pending` at once (a flood of Pulls for jobs that
// never start is refused with RESOURCE_EXHAUSTED instead of growing without
// end), each with a deadline (Expire) and cancellable by ticket (the RPC's
// cancellation or deadline).
//
// Plain state, not thread-safe: PsStore uses it under its mutex and runs the
// taken replies after releasing it.
#ifndef GRADSYNC_SERVER_PS_PULL_WAITERS_H_
#define GRADSYNC_SERVER_PS_PULL_WAITERS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/ps_layout.h"
#include "server/ps/ps_slice.h"

namespace gradsync {

// Pulls one shard keeps waiting, at most (all jobs together; submit refuses
// a job that alone could exceed it, common/spec/job_spec.cc).
inline constexpr size_t kMaxPendingPulls = kMaxShardPendingPulls;
// The longest a Pull waits, whatever its call's deadline.
inline constexpr absl::Duration kMaxPullWait = absl::Minutes(2);

struct PendingPull {
  uint64_t ticket = 0;
  Reply reply;
  absl::Time deadline;
  int rank = -1;
};

class PullWaiters {
 public:
  explicit PullWaiters(size_t max_pending = kMaxPendingPulls)
      : max_pending_(max_pending) {}

  // Adds a waiter for slice `key`; RESOURCE_EXHAUSTED (and `p` not taken)
  // when max_pending wait already.
  absl::Status Add(const std::string& key, PendingPull& p);
  // Removes and returns every waiter of `key`.
  std::vector<PendingPull> Take(const std::string& key);
  // Removes and returns the waiters of every key `match` accepts.
  std::vector<PendingPull> TakeIf(const std::function<bool(const std::string&)>& match);
  // Removes and returns the waiter with `ticket`, if it still waits.
  std::optional<PendingPull> Cancel(uint64_t ticket);
  // Removes and returns the waiters whose deadline is <= now.
  std::vector<PendingPull> Expire(absl::Time now);
  // Distinct ranks waiting on `key`.
  size_t Ranks(const std::string& key) const;
  size_t size() const { return count_; }

 private:
  const size_t max_pending_;
  std::map<std::string, std::vector<PendingPull>> by_key_;
  size_t count_ = 0;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_PS_PULL_WAITERS_H_
