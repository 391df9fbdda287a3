// StallWatch / StallWait with a fake clock (FakeEnv), and StallTransport
// over the in-process transport on the same fake clock (a report names the
// peer and tag; the split wait loses no message).
#include "worker/sync/stall_watch.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/testing/fake_env.h"
#include "worker/collectives/transport/inproc/inproc_transport.h"
#include "worker/sync/stall_transport.h"

namespace gradsync {
namespace {

constexpr absl::Duration kThreshold = absl::Seconds(10);

// A clock the test moves, and the reports a watch sent.
class StallWatchTest : public ::testing::Test {
 protected:
  StallWatch Watch() {
    return StallWatch(
        kThreshold,
        [this](const StallReport& r) {
          absl::MutexLock lock(&mu_);
          reports_.push_back(r);
        },
        &env_);
  }
  void Advance(absl::Duration d) { env_.Advance(d); }
  std::vector<StallReport> Reports() {
    absl::MutexLock lock(&mu_);
    return reports_;
  }
  static StallReport What() {
    StallReport r;
    r.waiting_for = "rank 3 (127.0.0.1:7003)";
    r.step = 42;
    r.bucket = 1;
    r.phase = "reduce-scatter";
    return r;
  }

  const absl::Time start_ = absl::FromUnixSeconds(1000);
  FakeEnv env_{start_};
  absl::Mutex mu_;
  std::vector<StallReport> reports_ ABSL_GUARDED_BY(mu_);
};

TEST_F(StallWatchTest, ReportsOnceAfterTheThresholdAndWhenResolved) {
  StallWatch watch = Watch();
  const absl::Time deadline = start_ + absl::Seconds(30);
  {
    StallWait wait(&watch);
    EXPECT_EQ(wait.Until(deadline), start_ + kThreshold);
    Advance(kThreshold - absl::Milliseconds(1));
    wait.Check(What);
    EXPECT_TRUE(Reports().empty()) << "reported before the threshold";
    Advance(absl::Milliseconds(1));
    wait.Check(What);
    ASSERT_EQ(Reports().size(), 1u);
    EXPECT_EQ(wait.Until(deadline), deadline) << "reported: wait to the end";
    Advance(absl::Seconds(5));
    wait.Check(What);
    EXPECT_EQ(Reports().size(), 1u) << "reported twice";
  }
  const std::vector<StallReport> r = Reports();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].waiting_for, "rank 3 (127.0.0.1:7003)");
  EXPECT_EQ(r[0].step, 42);
  EXPECT_EQ(r[0].bucket, 1);
  EXPECT_EQ(r[0].phase, "reduce-scatter");
  EXPECT_EQ(r[0].waited, kThreshold);
  EXPECT_FALSE(r[0].resolved);
  EXPECT_EQ(r[1].waiting_for, r[0].waiting_for);
  EXPECT_EQ(r[1].waited, kThreshold + absl::Seconds(5));
  EXPECT_TRUE(r[1].resolved);
}

TEST_F(StallWatchTest, WaitEndingBeforeTheThresholdReportsNothing) {
  StallWatch watch = Watch();
  {
    StallWait wait(&watch);
    Advance(kThreshold / 2);
    wait.Check(What);
  }
  EXPECT_TRUE(Reports().empty());
}

TEST_F(StallWatchTest, FailedWaitSendsNoResolvedReport) {
  StallWatch watch = Watch();
  {
    StallWait wait(&watch);
    Advance(kThreshold);
    wait.Check(What);
    wait.Failed();
  }
  ASSERT_EQ(Reports().size(), 1u);
  EXPECT_FALSE(Reports()[0].resolved);
}

TEST_F(StallWatchTest, DeadlineBeforeTheThresholdIsKept) {
  StallWatch watch = Watch();
  StallWait wait(&watch);
  EXPECT_EQ(wait.Until(start_ + absl::Seconds(1)), start_ + absl::Seconds(1));
}

TEST(StallWait, WithoutWatchNeverReports) {
  StallWait wait(nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(1);
  EXPECT_EQ(wait.Until(deadline), deadline);
  wait.Check([] { return StallReport{}; });
  EXPECT_FALSE(wait.reported());
}

// Fake clock: rank 1 waits for rank 0, which moves the clock past the
// threshold, sends once the wait has been reported, and not before.
TEST(StallTransport, ReportsTheWaitAndStillDeliversTheMessage) {
  FakeEnv env;
  absl::Mutex mu;
  std::vector<StallReport> reports;
  StallWatch watch(
      absl::Milliseconds(50),
      [&](const StallReport& r) {
        absl::MutexLock lock(&mu);
        reports.push_back(r);
      },
      &env);
  InProcGroup group(2, WireDtype::kFp32, &env);
  StallTransport receiver(group.transport(1), &watch, {"host0:1", "host1:2"});
  const ChunkTag tag = MakeTag(7, 2, CollectivePhase::kAllgather, 0, 0);
  std::vector<float> data = {1, 2, 3};
  std::thread sender([&] {
    // The receiver reports once the fake clock is 50 ms past the start of
    // its wait; move it 10 ms at a time until it has (a real-time bound
    // only keeps a broken build from hanging).
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    const auto reported = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return !reports.empty();
    };
    while (absl::Now() < give_up) {
      env.Advance(absl::Milliseconds(10));
      absl::MutexLock lock(&mu);
      if (mu.AwaitWithTimeout(absl::Condition(&reported), absl::Milliseconds(5))) {
        break;
      }
    }
    ASSERT_TRUE(group.transport(0)->Send(1, tag, data.data(), 3).ok());
  });
  absl::StatusOr<std::unique_ptr<RecvChunk>> got =
      receiver.Recv(0, tag, 3, env.Now() + absl::Seconds(20));
  sender.join();
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<float> out(3);
  (*got)->CopyTo(out.data());
  EXPECT_EQ(out, std::vector<float>({1, 2, 3}));
  absl::MutexLock lock(&mu);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].waiting_for, "rank 0 (host0:1)");
  EXPECT_EQ(reports[0].step, 7);
  EXPECT_EQ(reports[0].bucket, 2);
  EXPECT_EQ(reports[0].phase, "allgather");
  EXPECT_FALSE(reports[0].resolved);
  EXPECT_GE(reports[0].waited, absl::Milliseconds(50));
  EXPECT_TRUE(reports[1].resolved);
  EXPECT_GE(reports[1].waited, reports[0].waited);
}

TEST(StallTransport, DeadlineBeforeTheThresholdFailsWithoutReport) {
  FakeEnv env;
  int reports = 0;
  StallWatch watch(
      absl::Seconds(30), [&](const StallReport&) { ++reports; }, &env);
  InProcGroup group(2, WireDtype::kFp32, &env);
  StallTransport receiver(group.transport(1), &watch, {});
  const absl::Time deadline = env.Now() + absl::Milliseconds(50);
  std::thread clock([&] { env.Advance(absl::Milliseconds(50)); });
  absl::StatusOr<std::unique_ptr<RecvChunk>> got =
      receiver.Recv(0, MakeTag(1, 0, CollectivePhase::kReduceScatter, 0, 0), 3, deadline);
  clock.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  EXPECT_EQ(reports, 0);
}

}  // namespace
}  // namespace gradsync
