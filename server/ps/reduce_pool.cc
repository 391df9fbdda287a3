#include "server/ps/reduce_pool.h"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/exception_status.h"

namespace gradsync {

ReducePool::ReducePool(int threads) {
  const int n = std::max(1, threads);
  threads_.reserve(n);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Loop(); });
}

ReducePool::~ReducePool() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ReducePool::Schedule(absl::AnyInvocable<void() &&> task) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(task));
}

void ReducePool::ScheduleFirst(absl::AnyInvocable<void() &&> task) {
  absl::MutexLock lock(&mu_);
  queue_.push_front(std::move(task));
}

void ReducePool::Loop() {
  for (;;) {
    absl::AnyInvocable<void() &&> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stop_ and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    // A task answers its own RPC; if it throws, the pool thread survives
    // and the caller's deadline ends the call.
    const absl::Status st = GuardStatus("PS task", [&task] {
      std::move(task)();
      return absl::OkStatus();
    });
    if (!st.ok()) spdlog::error("{}", st.ToString());
  }
}

}  // namespace gradsync
