// What the coordinator keeps (JobRetention, job_table.h), on the injected
// clock: ended jobs beyond the limit are forgotten oldest-ended first while
// queued and running ones stay, events per job are capped without losing
// state changes, and dead workers are forgotten after their grace. No
// processes, sockets or sleeps.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/coordinator/job_table.h"
#include "server/coordinator/worker_registry.h"
#include "tests/server/job_table_test_util.h"

namespace gradsync {
namespace {

class JobRetentionTest : public ::testing::Test {
 protected:
  static JobTableOptions Options(size_t max_ended, size_t max_events) {
    JobTableOptions o;
    o.id_prefix = "t-";
    o.retention.max_ended_jobs = max_ended;
    o.retention.max_events_per_job = max_events;
    return o;
  }

  void Join(JobTable* table, const std::string& id) {
    ASSERT_TRUE(workers_.Register(id, id + ":7000", 0, env_.Now()).ok());
    Decisions d;
    table->Schedule(&d);
  }

  static std::string Submit(JobTable* table, const v1::JobSpec& spec) {
    Decisions d;
    absl::StatusOr<v1::Job> job = table->Submit(spec, &d);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id() : "";
  }

  static size_t Known(const JobTable& table) { return table.Jobs().size(); }

  FakeEnv env_;
  WorkerRegistry workers_;
};

TEST_F(JobRetentionTest, EndedJobsBeyondTheLimitGoOldestEndedFirst) {
  JobTable table(Options(/*max_ended=*/3, 100), &workers_, &env_);
  Join(&table, "w0");
  const std::string running = Submit(&table, Spec(v1::STRATEGY_ALLREDUCE, 1));
  ASSERT_EQ(table.Find(running)->state(), v1::RUNNING);
  // Two-worker jobs wait (one worker is registered); five of them cancelled.
  std::vector<std::string> cancelled;
  for (int i = 0; i < 5; ++i) {
    cancelled.push_back(Submit(&table, Spec(v1::STRATEGY_ALLREDUCE, 2)));
  }
  const std::string queued = Submit(&table, Spec(v1::STRATEGY_ALLREDUCE, 2));
  for (const std::string& id : cancelled) {
    Decisions d;
    ASSERT_TRUE(table.Cancel(id, &d).ok());
  }
  // The two cancelled first are forgotten; the running and queued stay.
  EXPECT_EQ(table.Find(cancelled[0]), nullptr);
  EXPECT_EQ(table.Find(cancelled[1]), nullptr);
  for (int i = 2; i < 5; ++i) EXPECT_NE(table.Find(cancelled[i]), nullptr);
  EXPECT_NE(table.Find(running), nullptr);
  EXPECT_NE(table.Find(queued), nullptr);
  EXPECT_EQ(Known(table), 5u);
  // The running job ends last: the oldest-ended cancelled one goes, not it.
  Decisions d;
  table.HandleJobDone("w0", Done(running, 0), &d);
  ASSERT_NE(table.Find(running), nullptr);
  EXPECT_EQ(table.Find(running)->state(), v1::SUCCEEDED);
  EXPECT_EQ(table.Find(cancelled[2]), nullptr);
  EXPECT_EQ(Known(table), 4u);
  WatchCursor cursor;
  std::vector<v1::JobEvent> events;
  EXPECT_EQ(table.ReadEvents(cancelled[0], &cursor, &events).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(JobRetentionTest, EventsBeyondTheCapAreDroppedButStateChangesKept) {
  JobTable table(Options(100, /*max_events=*/3), &workers_, &env_);
  Join(&table, "w0");
  const std::string id = Submit(&table, Spec(v1::STRATEGY_ALLREDUCE, 1));
  v1::WorkerMessage::Stall s;
  s.set_job_id(id);
  s.set_rank(0);
  s.set_waiting_for("rank 0 (w0:7000)");
  for (int i = 0; i < 50; ++i) {
    s.set_step(i);
    Decisions d;
    table.HandleStall("w0", s, &d);
  }
  Decisions d;
  table.HandleJobDone("w0", Done(id, 0), &d);
  WatchCursor cursor;
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(table.ReadEvents(id, &cursor, &events).value_or(false));
  int stalls = 0;
  std::vector<v1::JobState> states;
  for (const v1::JobEvent& ev : events) {
    if (ev.kind() == v1::JobEvent::STALL) ++stalls;
    if (ev.kind() == v1::JobEvent::STATE) states.push_back(ev.state());
  }
  EXPECT_EQ(stalls, 1);  // queued, running, one stall: the cap
  EXPECT_EQ(states, (std::vector<v1::JobState>{v1::QUEUED, v1::RUNNING, v1::SUCCEEDED}));
  // The job's own status still has the latest report.
  EXPECT_EQ(table.Find(id)->stalls_size(), 1);
}

TEST_F(JobRetentionTest, DeadWorkersAreForgottenAfterTheirGrace) {
  JobTable table(Options(100, 100), &workers_, &env_);
  Join(&table, "w0");
  Join(&table, "w1");
  Decisions d;
  table.WorkerLost("w0", "gone", &d);
  EXPECT_EQ(workers_.ForgetDead(env_.Now(), absl::Minutes(10)), 0u);
  ASSERT_NE(workers_.Find("w0"), nullptr);
  env_.Advance(absl::Minutes(11));
  EXPECT_EQ(workers_.ForgetDead(env_.Now(), absl::Minutes(10)), 1u);
  EXPECT_EQ(workers_.Find("w0"), nullptr);
  EXPECT_NE(workers_.Find("w1"), nullptr);  // alive, however long silent
  EXPECT_EQ(workers_.size(), 1u);
  // The forgotten id may join again.
  Join(&table, "w0");
  EXPECT_TRUE(workers_.IsLive("w0"));
}

}  // namespace
}  // namespace gradsync
