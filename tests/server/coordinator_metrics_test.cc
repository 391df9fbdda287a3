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
}

}  // namespace
}  // namespace gradsync
