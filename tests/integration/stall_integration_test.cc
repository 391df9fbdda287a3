// Stall reports end to end: a worker (ring) or PS shard (ps) is stopped with
// SIGSTOP mid-job; before the step timeout the coordinator's status names it
// as what a rank waits for; after SIGCONT the job goes on and the report is
// marked resolved.
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

// Long enough that nobody is declared dead while stopped.
constexpr double kHeartbeatTimeoutSeconds = 120;

// The line of `job.stalls` that names `culprit` and is (not) resolved, or
// empty.
std::string StallLine(const v1::Job& job, const std::string& culprit, bool resolved) {
  for (const std::string& line : job.stalls()) {
    const bool is_resolved = line.find("(resolved)") != std::string::npos;
    if (line.find(culprit) != std::string::npos && is_resolved == resolved) {
      return line;
    }
  }
  return "";
}

// Runs `spec` on `c`, calls stop() once it has made progress, expects a
// stall naming `culprit` while the job still runs, calls resume(), expects
// the job to go on with the stall resolved, then cancels it and expects a
// STALL event in its event stream.
void ExpectStallReportedAndResolved(Cluster& c, v1::JobSpec spec,
                                    const std::function<void()>& stop,
                                    const std::function<void()>& resume,
                                    const std::string& culprit) {
  spec.set_epochs(50);
  spec.set_step_timeout_ms(8000);
  spec.set_stall_report_ms(1500);
  v1::Job job;
  ASSERT_TRUE(c.Submit(spec, &job).ok());
  v1::Job running = c.WaitFor(job.id(), absl::Seconds(30), [](const v1::Job& j) {
    return j.state() == v1::RUNNING && j.step() >= 5;
  });
  ASSERT_EQ(running.state(), v1::RUNNING);
  stop();
  bool resumed = false;
  absl::Cleanup always_resume = [&] {
    if (!resumed) resume();
  };
  v1::Job stalled = c.WaitFor(job.id(), absl::Seconds(6), [&](const v1::Job& j) {
    return Terminal(j) || !StallLine(j, culprit, false).empty();
  });
  ASSERT_EQ(stalled.state(), v1::RUNNING) << stalled.error();
  const std::string line = StallLine(stalled, culprit, false);
  ASSERT_FALSE(line.empty()) << "no stall naming " << culprit;
  std::cout << "stall reported: " << line << "\n";
  resume();
  resumed = true;
  v1::Job after = c.WaitFor(job.id(), absl::Seconds(20), [&](const v1::Job& j) {
    return Terminal(j) ||
           (j.step() >= stalled.step() + 3 && !StallLine(j, culprit, true).empty());
  });
  ASSERT_EQ(after.state(), v1::RUNNING) << after.error();
  std::cout << "stall resolved: " << StallLine(after, culprit, true) << "\n";
  v1::Job cancelled;
  ASSERT_TRUE(c.Cancel(job.id(), &cancelled).ok());
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(c.Watch(job.id(), &events).ok());
  bool stall_event = false;
  for (const v1::JobEvent& ev : events) {
    if (ev.kind() == v1::JobEvent::STALL &&
        ev.message().find(culprit) != std::string::npos) {
      stall_event = true;
    }
  }
  EXPECT_TRUE(stall_event) << "no STALL event naming " << culprit;
}

TEST(StallIntegration, RingWaitForStoppedWorkerIsReportedThenResolved) {
  Cluster c(3, 1, false, kHeartbeatTimeoutSeconds);
  ASSERT_TRUE(c.ok());
  const std::string culprit = c->workers()[1].address;  // its peer address
  ExpectStallReportedAndResolved(
      c, Spec("ring", "sync", 3), [&] { c->StopWorker(1); },
      [&] { c->ContinueWorker(1); }, absl::StrCat("(", culprit, ")"));
}

TEST(StallIntegration, PsWaitForStoppedShardIsReportedThenResolved) {
  Cluster c(2, 2, false, kHeartbeatTimeoutSeconds);
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec = Spec("ps", "sync", 2);
  spec.set_ps_shards(2);
  // Several buckets, so that partitions land on both shards (p % 2).
  spec.set_bucket_bytes(1 << 18);
  ExpectStallReportedAndResolved(
      c, spec, [&] { c->StopShard(0); }, [&] { c->ContinueShard(0); },
      absl::StrCat("PS shard ", c->shards()[0].address));
}

}  // namespace
}  // namespace gradsync
