// A test Env whose clock moves only when the test (or a SleepFor) moves it,
// so that deadline, timeout, backoff and stall logic is driven by the test,
// not by how busy the machine is. Files are the real ones (use a temporary
// directory).
#ifndef GRADSYNC_COMMON_TESTING_FAKE_ENV_H_
#define GRADSYNC_COMMON_TESTING_FAKE_ENV_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"

namespace gradsync {

// Threading: thread-safe (the clock is guarded by its own leaf mutex).
//  - Now(), NowMonotonic(): the fake time; starts at `start`.
//  - SleepFor(d): advances the fake clock by d and returns at once.
//  - AwaitWithDeadline: re-checks `cond` in short real waits (kPoll, on the
//    caller's mutex, so that a signal wakes it at once) until `cond` holds
//    (true) or the fake clock reaches `deadline` (false). A deadline is
//    therefore reached only when the test advances the clock to it.
class FakeEnv final : public Env {
 public:
  static constexpr absl::Duration kPoll = absl::Milliseconds(1);

  explicit FakeEnv(absl::Time start = absl::FromUnixSeconds(1700000000)) : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&clock_mu_);
    return now_;
  }

  absl::Time NowMonotonic() const override { return Now(); }

  void SleepFor(absl::Duration d) const override {
    if (d > absl::ZeroDuration()) Advance(d);
  }

  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    while (!cond.Eval()) {
      if (Now() >= deadline) return false;
      mu->AwaitWithTimeout(cond, kPoll);
    }
    return true;
  }

  // Moves the clock (const: a const Env* is what code under test holds).
  void Advance(absl::Duration d) const {
    absl::MutexLock lock(&clock_mu_);
    now_ += d;
  }
  void Set(absl::Time t) const {
    absl::MutexLock lock(&clock_mu_);
    now_ = t;
  }

 private:
  mutable absl::Mutex clock_mu_;
  mutable absl::Time now_ ABSL_GUARDED_BY(clock_mu_);
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_TESTING_FAKE_ENV_H_
