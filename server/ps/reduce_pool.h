// A small fixed pool of threads that runs a PS shard's reductions and
// optimizer steps, so that gRPC's callback threads (a small pool of the
// library's own) only parse frames and hand work over.
#ifndef GRADSYNC_SERVER_PS_REDUCE_POOL_H_
#define GRADSYNC_SERVER_PS_REDUCE_POOL_H_

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace gradsync {

// Thread-safe. Tasks run in FIFO order (ScheduleFirst: at the front), each
// on one of the pool's threads;
// a task must not block on another task of the same pool.
class ReducePool {
 public:
  // Starts `threads` threads (at least 1).
  explicit ReducePool(int threads);
  // Runs every task still queued, then joins the threads.
  ~ReducePool();
  ReducePool(const ReducePool&) = delete;
  ReducePool& operator=(const ReducePool&) = delete;

  void Schedule(absl::AnyInvocable<void() &&> task);
  // Schedule, ahead of every task still queued: for short work that someone
  // waits for (a step's answers), not to wait behind queued reductions.
  void ScheduleFirst(absl::AnyInvocable<void() &&> task);

  // How many threads run the tasks.
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  // Takes and runs tasks until the queue is empty and stop_ is set. Idle
  // threads wait for work without a deadline: that is their only job.
  void Loop();

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // constant after construction
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_PS_REDUCE_POOL_H_
