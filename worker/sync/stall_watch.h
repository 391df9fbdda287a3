// Stall reports: a worker that waits longer than the job's stall threshold
// (JobSpec.stall_report_ms, default half the step timeout) for one peer rank
// or PS shard says so, once per wait, before the step timeout fails the job.
//
// No thread of its own: the waiter splits its wait at the threshold
// (StallWait::Until), and when it wakes there without what it waits for it
// reports (StallWait::Check) and goes on waiting until its real deadline. So
// the waiter, which alone knows what is still outstanding, names it, and a
// wait that ends in time costs one clock read and no allocation.
#ifndef GRADSYNC_WORKER_SYNC_STALL_WATCH_H_
#define GRADSYNC_WORKER_SYNC_STALL_WATCH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "common/env.h"

namespace gradsync {

// What a stalled wait waits for.
struct StallReport {
  std::string waiting_for;  // "rank 3 (HOST:PORT)", "PS shard HOST:PORT (JOB/p5)"
  int64_t step = 0;
  int32_t bucket = -1;    // -1: not one bucket's wait
  std::string phase;      // "reduce-scatter", "push-pull", ...
  absl::Duration waited;  // so far; the whole wait when resolved
  bool resolved = false;  // the wait has ended (in time or not)
};

// Threshold, clock and where reports go; shared by every wait of one job.
// Thread-safe: const after construction; the sink is called on the waiting
// threads, concurrently when several wait, and must be thread-safe.
class StallWatch {
 public:
  using Sink = std::function<void(const StallReport&)>;

  // `threshold` > 0. `env` (not owned, outlives the watch) is the clock.
  StallWatch(absl::Duration threshold, Sink sink, const Env* env = Env::Default());

  absl::Duration threshold() const { return threshold_; }
  absl::Time Now() const { return env_->Now(); }
  const Env* env() const { return env_; }
  void Emit(const StallReport& report) const { sink_(report); }

 private:
  const absl::Duration threshold_;
  const Sink sink_;
  const Env* const env_;
};

// One blocking wait, on the waiting thread's stack (not thread-safe).
// Protocol:
//  1. construct it when the wait begins (one clock read);
//  2. block until Until(deadline) instead of until `deadline`;
//  3. if that wait ends before `deadline` without what it waits for, call
//     Check(describe): once the threshold has passed it sends one report
//     (describe() is called then, and only then); go back to 2;
//  4. the destructor ends the wait: a reported wait that got what it waited
//     for sends a second report with resolved = true and the whole wait; one
//     that failed (Failed() called: its error tells the rest) sends none.
class StallWait {
 public:
  // Null `watch`: never reports; Until(d) == d.
  explicit StallWait(const StallWatch* watch);
  ~StallWait();
  StallWait(const StallWait&) = delete;
  StallWait& operator=(const StallWait&) = delete;

  // When to wake up to Check: the threshold, or `deadline` when that is
  // earlier or the wait has been reported.
  absl::Time Until(absl::Time deadline) const;
  // Reports the wait once, if the threshold has passed; describe() fills
  // every field but `waited` and `resolved`.
  void Check(absl::FunctionRef<StallReport()> describe);
  bool reported() const { return reported_.has_value(); }
  // The wait ends without what it waited for (error, deadline, abort).
  void Failed() { failed_ = true; }

 private:
  const StallWatch* const watch_;
  const absl::Time began_;
  std::optional<StallReport> reported_;
  bool failed_ = false;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_STALL_WATCH_H_
