// JobQueue on its own: FIFO with backfill, the head's passes and its
// reservation (by passes and by waiting time), a job that can never fit
// does not reserve, and ended jobs leave the queue.
#include "server/coordinator/job_queue.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "common/testing/fake_env.h"

namespace gradsync {
namespace {

class JobQueueTest : public ::testing::Test {
 protected:
  JobQueueTest() : queue_(&jobs_, &workers_, &env_) {}

  void AddWorkers(int n) {
    for (int i = 0; i < n; ++i) {
      const std::string id = "w" + std::to_string(i);
      ASSERT_TRUE(workers_.Register(id, id + ":1", 0, env_.Now(), "").ok());
    }
  }

  // Queues job `id` wanting `workers` ranks.
  void Queue(const std::string& id, int workers) {
    JobEntry& e = jobs_[id];
    e.job.set_id(id);
    e.job.set_state(v1::QUEUED);
    e.job.mutable_spec()->set_workers(workers);
    e.queued = env_.Now();
    queue_.Push(id);
  }

  // One pass; the jobs it placed, in order (their workers become busy).
  std::vector<std::string> Pass() {
    std::vector<std::string> placed;
    queue_.Schedule([&](JobEntry* e, const std::vector<const RegisteredWorker*>& picked) {
      EXPECT_EQ(static_cast<int>(picked.size()), e->job.spec().workers());
      for (const RegisteredWorker* w : picked) workers_.Assign(w->id, e->job.id());
      e->job.set_state(v1::RUNNING);
      placed.push_back(e->job.id());
    });
    return placed;
  }

  void Finish(const std::string& id) {
    for (const RegisteredWorker* w : workers_.Live()) workers_.Release(w->id, id);
    jobs_[id].job.set_state(v1::SUCCEEDED);
  }

  FakeEnv env_;
  WorkerRegistry workers_;
  JobEntries jobs_;
  JobQueue queue_;
};

TEST_F(JobQueueTest, JobsThatFitStartInOrderAndLaterOnesBackfill) {
  AddWorkers(3);
  Queue("a", 2);
  Queue("b", 2);  // does not fit beside a: the head
  Queue("c", 1);  // fits: passes b
  EXPECT_EQ(Pass(), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(jobs_["b"].backfill_passes, 1);
  EXPECT_EQ(queue_.size(), 1u);
  Finish("a");
  Finish("c");
  EXPECT_EQ(Pass(), (std::vector<std::string>{"b"}));
  EXPECT_TRUE(queue_.empty());
}

TEST_F(JobQueueTest, AHeadPassedTooOftenReservesTheCluster) {
  AddWorkers(2);
  Queue("long", 1);
  EXPECT_EQ(Pass(), (std::vector<std::string>{"long"}));
  Queue("head", 2);
  jobs_["head"].backfill_passes = kMaxBackfillPasses - 1;
  Queue("small1", 1);
  Queue("small2", 1);  // would fit too, but the head reserves after small1
  EXPECT_EQ(Pass(), (std::vector<std::string>{"small1"}));
  EXPECT_EQ(jobs_["head"].backfill_passes, kMaxBackfillPasses);
  EXPECT_TRUE(queue_.Reserves(jobs_["head"]));
  Finish("small1");
  EXPECT_TRUE(Pass().empty());  // small2 waits behind the reserving head
  Finish("long");
  EXPECT_EQ(Pass(), (std::vector<std::string>{"head"}));
}

TEST_F(JobQueueTest, AHeadThatWaitedLongEnoughReservesToo) {
  AddWorkers(2);
  Queue("long", 1);
  EXPECT_EQ(Pass(), (std::vector<std::string>{"long"}));
  Queue("head", 2);
  EXPECT_FALSE(queue_.Reserves(jobs_["head"]));
  env_.Advance(kBackfillReserveAfter);
  EXPECT_TRUE(queue_.Reserves(jobs_["head"]));
  Queue("small", 1);
  EXPECT_TRUE(Pass().empty());
}

TEST_F(JobQueueTest, AJobLargerThanTheClusterNeverReserves) {
  AddWorkers(1);
  Queue("huge", 5);
  jobs_["huge"].backfill_passes = kMaxBackfillPasses + 3;
  env_.Advance(kBackfillReserveAfter * 2);
  Queue("small", 1);
  EXPECT_EQ(Pass(), (std::vector<std::string>{"small"}));
}

TEST_F(JobQueueTest, EndedAndUnknownJobsLeaveTheQueue) {
  Queue("cancelled", 1);
  jobs_["cancelled"].job.set_state(v1::CANCELLED);
  queue_.Push("forgotten");  // no entry
  EXPECT_TRUE(Pass().empty());
  EXPECT_TRUE(queue_.empty());
}

}  // namespace
}  // namespace gradsync
