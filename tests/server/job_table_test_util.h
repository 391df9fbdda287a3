// What the job table's tests share: a clock that moves only when told, a
// small valid job spec, a rank's JobDone, and the JobTableTest fixture (a
// table with three PS shards on a fake clock and a worker registry).
#ifndef GRADSYNC_TESTS_SERVER_JOB_TABLE_TEST_UTIL_H_
#define GRADSYNC_TESTS_SERVER_JOB_TABLE_TEST_UTIL_H_

#include <cstddef>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/testing/fake_env.h"
#include "gradsync/v1/gradsync.pb.h"
#include "server/coordinator/job_table.h"
#include "server/coordinator/worker_registry.h"

namespace gradsync {

inline constexpr char kModel[] = "mlp:784-10";  // 7850 parameters
inline constexpr size_t kModelParams = 784 * 10 + 10;

// A sync job of `workers` ranks on kModel, 100 steps.
inline v1::JobSpec Spec(v1::Strategy strategy, int workers) {
  v1::JobSpec s;
  s.set_strategy(strategy);
  s.set_mode(v1::SYNC_MODE_SYNC);
  s.set_workers(workers);
  s.set_model(kModel);
  s.set_batch_size(32);
  s.set_steps(100);
  return s;
}

// Rank `rank`'s JobDone for `job`: `status`, checksum "c0ffee", 100 steps.
inline v1::WorkerMessage::JobDone Done(const std::string& job, int rank,
                                       absl::Status status = absl::OkStatus()) {
  v1::WorkerMessage::JobDone d;
  d.set_job_id(job);
  d.set_rank(rank);
  d.set_code(static_cast<int>(status.code()));
  d.set_error(std::string(status.message()));
  d.set_param_checksum("c0ffee");
  d.set_steps(100);
  return d;
}

// A table with PS shards ps0:1, ps1:1, ps2:1 and job ids "t-N" on a
// FakeEnv, with helpers that act as a worker's Join and JobDone do.
class JobTableTest : public ::testing::Test {
 protected:
  JobTableTest() : table_(Options(), &workers_, &env_) {}

  static JobTableOptions Options() {
    JobTableOptions o;
    o.ps_addresses = {"ps0:1", "ps1:1", "ps2:1"};
    o.id_prefix = "t-";
    return o;
  }

  // Registers a worker (peer "<id>:7000", bulk peer "<id>:7001") and
  // schedules, as a Join does.
  Decisions Join(const std::string& id, int gpus = 0) {
    EXPECT_TRUE(workers_.Register(id, id + ":7000", gpus, env_.Now(), id + ":7001").ok());
    Decisions d;
    table_.Schedule(&d);
    return d;
  }

  std::string Submit(const v1::JobSpec& spec, Decisions* d) {
    absl::StatusOr<v1::Job> job = table_.Submit(spec, d);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id() : "";
  }

  std::string Submit(const v1::JobSpec& spec) {
    Decisions d;
    return Submit(spec, &d);
  }

  const v1::Job& Job(const std::string& id) {
    const v1::Job* job = table_.Find(id);
    EXPECT_NE(job, nullptr) << id;
    static const v1::Job* const kEmpty = new v1::Job();
    return job == nullptr ? *kEmpty : *job;
  }

  Decisions JobDone(const std::string& worker, const v1::WorkerMessage::JobDone& d) {
    Decisions out;
    table_.HandleJobDone(worker, d, &out);
    return out;
  }

  std::string BusyWith(const std::string& worker) {
    return workers_.Find(worker)->job_id;
  }

  std::vector<std::string> WorkersOf(const std::string& id) {
    return {Job(id).workers().begin(), Job(id).workers().end()};
  }

  // Reads job `id`'s new events into `events`; returns whether it ended.
  bool Read(const std::string& id, WatchCursor* cursor,
            std::vector<v1::JobEvent>* events) {
    events->clear();
    absl::StatusOr<bool> ended = table_.ReadEvents(id, cursor, events);
    EXPECT_TRUE(ended.ok()) << ended.status();
    return ended.value_or(false);
  }

  FakeEnv env_;
  WorkerRegistry workers_;
  JobTable table_;
};

// Worker ids that get a message of `kind` in `d`, in order.
inline std::vector<std::string> SentTo(const Decisions& d,
                                       v1::CoordinatorMessage::MsgCase kind) {
  std::vector<std::string> to;
  for (const WorkerSend& s : d.sends) {
    if (s.message.msg_case() == kind) to.push_back(s.worker_id);
  }
  return to;
}

using Ids = std::vector<std::string>;
inline constexpr auto kAssignment = v1::CoordinatorMessage::kAssignment;
inline constexpr auto kCancel = v1::CoordinatorMessage::kCancel;

}  // namespace gradsync

#endif  // GRADSYNC_TESTS_SERVER_JOB_TABLE_TEST_UTIL_H_
