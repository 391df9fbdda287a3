// Integration: the coordinator's job history across a real server restart
// (SIGKILL, then the same --state_dir and address), and the server's refusal
// of a corrupt history at start-up.
#include <sys/stat.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/job_secret.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

// A two-rank ring job short enough for a test: one epoch over 2048 samples.
v1::JobSpec ShortJob() {
  v1::JobSpec s = Spec("ring", "sync", 2);
  s.set_epochs(1);
  s.set_train_limit(2048);
  return s;
}

TEST(JobHistory, ServerRestartKeepsEndedJobsFailsRunningOnesRunsQueuedOnes) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  // 1. a job that succeeds, 2. one still running at the kill, 3. one queued
  //    behind it.
  v1::Job done, running, queued;
  ASSERT_TRUE(c.Submit(ShortJob(), &done).ok());
  done = c.WaitFor(done.id(), absl::Seconds(60), Terminal);
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  ASSERT_EQ(done.result().epochs_size(), 1);
  v1::JobSpec long_spec = Spec("ring", "sync", 2);
  long_spec.set_epochs(50);  // far longer than the test
  ASSERT_TRUE(c.Submit(long_spec, &running).ok());
  running = c.WaitFor(running.id(), absl::Seconds(30), [](const v1::Job& j) {
    return j.state() == v1::RUNNING && j.step() >= 5;
  });
  ASSERT_EQ(running.state(), v1::RUNNING) << running.error();
  ASSERT_TRUE(c.Submit(ShortJob(), &queued).ok());
  ASSERT_EQ(queued.state(), v1::QUEUED);

  const absl::Time killed = absl::Now();
  ASSERT_TRUE(c->RestartServer().ok());
  std::cout << "server restarted, workers back after "
            << absl::FormatDuration(absl::Now() - killed) << "\n";

  v1::ListJobsResponse list;
  ASSERT_TRUE(c.List(&list).ok());
  ASSERT_EQ(list.jobs_size(), 3);
  EXPECT_EQ(list.jobs(0).id(), done.id());
  EXPECT_EQ(list.jobs(1).id(), running.id());
  EXPECT_EQ(list.jobs(2).id(), queued.id());
  v1::Job after;
  ASSERT_TRUE(c.Get(done.id(), &after).ok());
  EXPECT_EQ(after.state(), v1::SUCCEEDED);
  EXPECT_EQ(after.result().SerializeAsString(), done.result().SerializeAsString());
  EXPECT_EQ(after.end_time_ms(), done.end_time_ms());
  ASSERT_TRUE(c.Get(running.id(), &after).ok());
  EXPECT_EQ(after.state(), v1::FAILED);
  EXPECT_EQ(after.error(), "coordinator restarted");
  EXPECT_EQ(after.error_code(), static_cast<int>(absl::StatusCode::kUnavailable));
  // watch replays the old job's history and ends.
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(c.Watch(done.id(), &events).ok());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().state(), v1::SUCCEEDED);
  int epochs = 0;
  for (const v1::JobEvent& ev : events) epochs += ev.kind() == v1::JobEvent::EPOCH;
  EXPECT_EQ(epochs, 1);
  // The queued job runs on the workers that came back.
  after = c.WaitFor(queued.id(), absl::Seconds(60), Terminal);
  EXPECT_EQ(after.state(), v1::SUCCEEDED) << after.error();
  // A new job's id does not repeat an old one.
  v1::Job fresh;
  v1::JobSpec huge = Spec("ring", "sync", 50);
  ASSERT_TRUE(c.Submit(huge, &fresh).ok());
  EXPECT_EQ(fresh.id().substr(fresh.id().rfind('-')), "-4") << fresh.id();
  ASSERT_TRUE(c.Cancel(fresh.id(), &fresh).ok());
}

TEST(JobHistory, ServerRefusesACorruptHistoryAndLeavesItUntouched) {
  const std::string dir = TempDir();
  const std::string db = dir + "/jobs.db";
  std::mt19937 rng(7);
  std::string junk(8192, '\0');
  for (char& ch : junk) ch = static_cast<char>(rng());
  {
    std::ofstream out(db, std::ios::binary);
    out << junk;
  }
  // A token (not --auth=none, whose warning would be a second line of err).
  const std::string server = absl::StrCat("env GRADSYNC_TOKEN=0123456789abcdef0123 ",
                                          GRADSYNC_BIN_DIR, "/gradsync-server");
  const int rc = Shell(absl::StrCat(server, " --listen=127.0.0.1:0 --state_dir=", dir,
                                    " > ", dir, "/out 2> ", dir, "/err"),
                       30);
  EXPECT_EQ(rc, 1);
  const std::string err = Slurp(dir + "/err");
  EXPECT_EQ(err.rfind("gradsync-server: " + db + " is not an SQLite database", 0), 0u)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(Slurp(db), junk);
  // A PS-only server does not open the history at all.
  ASSERT_TRUE(JobKey::WriteNewFile(dir + "/job.key").ok());
  EXPECT_EQ(
      Shell(absl::StrCat(server, " --role=ps --listen=127.0.0.1:0 --state_dir=", dir,
                         " --job_key_file=", dir, "/job.key > ", dir, "/ps.out 2>&1"),
            3),
      124);
  EXPECT_NE(Slurp(dir + "/ps.out").find("listening on"), std::string::npos)
      << Slurp(dir + "/ps.out");
}

}  // namespace
}  // namespace gradsync
