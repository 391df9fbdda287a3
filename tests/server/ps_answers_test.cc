// How a PS shard sends a step's answers (SpreadAnswers, ps_stream.h) and
// the ReducePool that runs its reductions and answer groups.
#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/ps/ps_slice.h"
#include "server/ps/ps_stream.h"
#include "server/ps/reduce_pool.h"

namespace gradsync {
namespace {

// A step's answers: up to kPsAnswersHere on the calling thread alone; more
// in one group per pool thread plus one, the caller's at most
// kPsInlineReplies; every answer exactly once.
TEST(SpreadAnswers, SendsEachOnceAndAFewOnTheCallingThread) {
  for (int threads : {1, 2, 4}) {
    for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{8},
                     size_t{9}, size_t{20}}) {
      SCOPED_TRACE(absl::StrCat(threads, " pool threads, ", n, " answers"));
      absl::Mutex mu;
      std::vector<int> times(n, 0);
      size_t here = 0;
      const std::thread::id caller = std::this_thread::get_id();
      {
        ReducePool pool(threads);
        PsCompletions done;
        for (size_t i = 0; i < n; ++i) {
          done.push_back({[&, i](absl::StatusOr<PsReply>) {
                            absl::MutexLock lock(&mu);
                            ++times[i];
                            if (std::this_thread::get_id() == caller) ++here;
                          },
                          absl::CancelledError("an answer")});
        }
        SpreadAnswers(std::move(done), &pool);
      }  // the pool drains its queue
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(times[i], 1) << "answer " << i;
      const size_t groups = std::min(n, static_cast<size_t>(threads) + 1);
      const size_t want =
          n <= kPsAnswersHere ? n : std::min(kPsInlineReplies, (n + groups - 1) / groups);
      EXPECT_EQ(here, want);
    }
  }
}

// The groups are sent at the same time: with 2 pool threads, 6 answers go
// out from 3 threads at once. Each answer waits (2 s at most) until 3 are
// being sent together; sent one after another, none would see that.
TEST(SpreadAnswers, SendsTheGroupsAtTheSameTime) {
  absl::Mutex mu;
  int active = 0;
  int most = 0;
  int saw_three = 0;
  {
    ReducePool pool(2);
    PsCompletions done;
    for (int i = 0; i < 6; ++i) {
      done.push_back(
          {[&](absl::StatusOr<PsReply>) {
             absl::MutexLock lock(&mu);
             most = std::max(most, ++active);
             auto three = [&most]() { return most >= 3; };
             if (mu.AwaitWithTimeout(absl::Condition(&three), absl::Seconds(2))) {
               ++saw_three;
             }
             --active;
           },
           absl::CancelledError("an answer")});
    }
    SpreadAnswers(std::move(done), &pool);
  }
  EXPECT_EQ(most, 3);
  EXPECT_EQ(saw_three, 6);
}

// ScheduleFirst jumps the queue: answers do not wait behind reductions.
TEST(ReducePool, ScheduleFirstRunsAheadOfQueuedTasks) {
  absl::Mutex mu;
  bool release = false;
  std::vector<std::string> order;
  {
    ReducePool pool(1);
    pool.Schedule([&] {  // holds the one thread until the rest are queued
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(&release));
    });
    pool.Schedule([&] {
      absl::MutexLock lock(&mu);
      order.push_back("reduction");
    });
    pool.ScheduleFirst([&] {
      absl::MutexLock lock(&mu);
      order.push_back("answers");
    });
    absl::MutexLock lock(&mu);
    release = true;
  }
  EXPECT_EQ(order, (std::vector<std::string>{"answers", "reduction"}));
}

TEST(ReducePool, RunsEveryTaskAndDrainsTheQueueOnDestruction) {
  std::atomic<int> ran{0};
  {
    ReducePool pool(2);
    for (int i = 0; i < 1000; ++i) pool.Schedule([&ran] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 1000);
}

}  // namespace
}  // namespace gradsync
