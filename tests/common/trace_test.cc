// The --trace recorder: bounded, thread-safe, null-safe spans.
#include "common/trace/trace.h"

#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace gradsync {
namespace {

TEST(TraceRecorderTest, SpansAndInstantsAreRecordedInOrder) {
  TraceRecorder r;
  { TraceSpan s(&r, "forward", "compute", kTraceTrain, 7, -1, 2); }
  TraceInstant(&r, "bucket ready", "compute", kTraceTrain, 7, 1);
  std::vector<TraceEvent> ev = r.Take();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_STREQ(ev[0].name, "forward");
  EXPECT_EQ(ev[0].step, 7);
  EXPECT_EQ(ev[0].layer, 2);
  EXPECT_GE(ev[0].dur_us, 0);
  EXPECT_GT(ev[0].start_us, 0);
  EXPECT_LT(ev[1].dur_us, 0);  // instant
  EXPECT_EQ(ev[1].bucket, 1);
  EXPECT_GE(ev[1].start_us, ev[0].start_us);
  EXPECT_TRUE(r.Take().empty());  // taken
}

TEST(TraceRecorderTest, NullRecorderIsANoOp) {
  TraceSpan s(nullptr, "x", "y", kTraceSync, 0);
  TraceInstant(nullptr, "x", "y", kTraceSync, 0);
}

TEST(TraceRecorderTest, BoundedBufferCountsDrops) {
  TraceRecorder r(10);
  for (int i = 0; i < 25; ++i) TraceInstant(&r, "e", "c", kTraceTrain, i);
  EXPECT_EQ(r.dropped(), 15);
  std::vector<TraceEvent> ev = r.Take();
  ASSERT_EQ(ev.size(), 10u);
  EXPECT_EQ(ev.back().step, 9);  // the first ones are kept
}

TEST(TraceRecorderTest, ConcurrentThreadsLoseNothingUnderTheCap) {
  constexpr int kThreads = 4, kEach = 5000;
  TraceRecorder r(kThreads * kEach + 100);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&r, t] {
      for (int i = 0; i < kEach; ++i) {
        TraceSpan s(&r, "sync bucket", "comm", t, i, t);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<TraceEvent> ev = r.Take();
  EXPECT_EQ(ev.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(r.dropped(), 0);
  std::set<std::pair<int, int64_t>> seen;
  for (const TraceEvent& e : ev) seen.emplace(e.thread, e.step);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kEach));
}

TEST(TraceRecorderTest, ConcurrentThreadsOverTheCapStayBounded) {
  TraceRecorder r(1000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&r] {
      for (int i = 0; i < 2000; ++i) TraceInstant(&r, "e", "c", kTraceCopy, i);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(r.Take().size(), 1000u);
  EXPECT_EQ(r.dropped(), 5000);
}

}  // namespace
}  // namespace gradsync
