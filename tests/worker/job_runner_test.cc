// JobRunner without a coordinator: what it answers at once, without
// starting a job thread (a busy or stopped worker refuses an assignment
// with a failed JobDone naming why).
#include "worker/job_runner.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"

namespace gradsync {
namespace {

class JobRunnerTest : public ::testing::Test {
 protected:
  JobRunnerTest() {
    JobRunnerContext c;
    c.options = &options_;
    c.worker_id = "w-test";
    c.metrics = &metrics_;
    c.mailboxes = &mailboxes_;
    c.write = [this](const v1::WorkerMessage& m) {
      absl::MutexLock lock(&mu_);
      written_.push_back(m);
      return true;
    };
    runner_ = std::make_unique<JobRunner>(std::move(c));
  }

  std::vector<v1::WorkerMessage> Written() {
    absl::MutexLock lock(&mu_);
    return written_;
  }

  WorkerOptions options_;
  MetricsRegistry registry_;
  WorkerMetrics metrics_{&registry_};
  PeerMailboxes mailboxes_;
  absl::Mutex mu_;
  std::vector<v1::WorkerMessage> written_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<JobRunner> runner_;
};

TEST_F(JobRunnerTest, AStoppedRunnerRefusesAnAssignmentAtOnce) {
  runner_->Stop();
  v1::Assignment a;
  a.set_job_id("j-1");
  a.set_rank(2);
  runner_->Start(a);
  const std::vector<v1::WorkerMessage> w = Written();
  ASSERT_EQ(w.size(), 1u);
  ASSERT_TRUE(w[0].has_job_done());
  EXPECT_EQ(w[0].job_done().job_id(), "j-1");
  EXPECT_EQ(w[0].job_done().rank(), 2);
  EXPECT_EQ(w[0].job_done().code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_EQ(w[0].job_done().error(), "worker w-test is stopping");
}

}  // namespace
}  // namespace gradsync
