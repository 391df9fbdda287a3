// The coordinator's /metrics families: counted from jobs and workers, and
// rendered at every scrape.
#include "server/coordinator/coordinator_metrics.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace gradsync {
namespace {

TEST(CoordinatorMetrics, CountsJobsByStateAndWorkers) {
  std::vector<v1::Job> jobs(4);
  jobs[0].set_state(v1::SUCCEEDED);
  jobs[1].set_state(v1::RUNNING);
  jobs[2].set_state(v1::QUEUED);
  jobs[3].set_state(v1::QUEUED);
  RegisteredWorker idle, busy;
  busy.job_id = "j-1";
  const CoordinatorStats s =
      CountCoordinatorStats({&jobs[0], &jobs[1], &jobs[2], &jobs[3]}, {&idle, &busy});
  EXPECT_EQ(s.jobs.at(v1::QUEUED), 2);
  EXPECT_EQ(s.jobs.at(v1::RUNNING), 1);
  EXPECT_EQ(s.jobs.at(v1::SUCCEEDED), 1);
  EXPECT_EQ(s.jobs.at(v1::FAILED), 0);
  EXPECT_EQ(s.jobs_total, 4);
  EXPECT_EQ(s.live_workers, 2);
  EXPECT_EQ(s.busy_workers, 1);
}

TEST(CoordinatorMetrics, RendersWhatTheStatsSayAtEachScrape) {
  MetricsRegistry r;
  CoordinatorStats stats = CountCoordinatorStats({}, {});
  RegisterCoordinatorMetrics([&stats] { return stats; }, &r);
  std::string text = r.Render();
  EXPECT_TRUE(absl::StrContains(text, "gradsync_server_jobs{state=\"FAILED\"} 0\n"))
      << text;
  EXPECT_TRUE(
      absl::StrContains(text, "# TYPE gradsync_server_jobs_submitted_total counter\n"));
  stats.jobs[v1::QUEUED] = 3;
  stats.jobs_total = 3;
  text = r.Render();
  EXPECT_TRUE(absl::StrContains(text, "gradsync_server_queue_length 3\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "gradsync_server_jobs_submitted_total 3\n"));
  EXPECT_FALSE(
      absl::StrContains(text, "gradsync_server_jobs_finished_total{state=\"QUEUED\"}"));
  EXPECT_FALSE(absl::StrContains(text, "gradsync_job_slowest_rank{"));
}

TEST(CoordinatorMetrics, RunningJobsSlowestRankAndItsRatio) {
  std::vector<v1::Job> jobs(2);
  jobs[0].set_id("j-run");
  jobs[0].set_state(v1::RUNNING);
  jobs[0].mutable_result()->mutable_slowest_rank()->set_rank(2);
  jobs[0].mutable_result()->mutable_slowest_rank()->set_ratio(2.5);
  jobs[1].set_id("j-done");  // ended: its slowest rank is in its result only
  jobs[1].set_state(v1::SUCCEEDED);
  jobs[1].mutable_result()->mutable_slowest_rank()->set_rank(1);
  const CoordinatorStats stats = CountCoordinatorStats({&jobs[0], &jobs[1]}, {});
  ASSERT_EQ(stats.slowest.size(), 1u);
  MetricsRegistry r;
  RegisterCoordinatorMetrics([&stats] { return stats; }, &r);
  const std::string text = r.Render();
  EXPECT_TRUE(absl::StrContains(text, "gradsync_job_slowest_rank{job=\"j-run\"} 2\n"))
      << text;
  EXPECT_TRUE(
      absl::StrContains(text, "gradsync_job_slowest_rank_ratio{job=\"j-run\"} 2.5\n"))
      << text;
  EXPECT_FALSE(absl::StrContains(text, "j-done"));
}

}  // namespace
}  // namespace gradsync
