// The job table with a JobStore: what is saved and when, and what a
// coordinator restart (a new table and registry on the same store) recovers.
// Restarts use the real SqliteJobStore in a temporary directory; the saving
// rules use a store that records each Save (and can fail it).
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "server/coordinator/job_history.h"
#include "server/coordinator/job_table.h"
#include "server/coordinator/sqlite_job_store.h"
#include "server/coordinator/worker_registry.h"
#include "tests/server/job_table_test_util.h"

namespace gradsync {
namespace {

// Keeps every Save; fails the next `fail_saves` of them.
class RecordingStore final : public JobStore {
 public:
  struct SaveCall {
    v1::Job job;
    std::vector<v1::JobEvent> events;
  };

  absl::StatusOr<std::vector<StoredJob>> LoadAll() override {
    if (!load_error.ok()) return load_error;
    return std::vector<StoredJob>{};
  }
  absl::Status Save(const v1::Job& job, absl::Span<const v1::JobEvent> events) override {
    if (fail_saves > 0) {
      --fail_saves;
      return absl::UnavailableError("disk full (injected)");
    }
    saves.push_back({job, {events.begin(), events.end()}});
    return absl::OkStatus();
  }

  std::vector<SaveCall> saves;
  int fail_saves = 0;
  absl::Status load_error;
};

class JobHistoryTest : public ::testing::Test {
 protected:
  ~JobHistoryTest() override {
    table_.reset();
    sqlite_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Starts a coordinator's table on the SQLite store in dir_, after dropping
  // the previous table, registry and store as a dying process would.
  void Restart(const std::string& id_prefix,
               std::vector<std::string> ps_addresses = {"ps0:1"}) {
    table_.reset();
    sqlite_.reset();
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    sqlite_ = *std::move(store);
    StartOn(sqlite_.get(), id_prefix, std::move(ps_addresses));
  }

  void StartOn(JobStore* store, const std::string& id_prefix,
               std::vector<std::string> ps_addresses = {"ps0:1"}) {
    table_.reset();
    workers_ = std::make_unique<WorkerRegistry>();
    JobTableOptions o;
    o.ps_addresses = std::move(ps_addresses);
    o.id_prefix = id_prefix;
    o.store = store;
    table_ = std::make_unique<JobTable>(o, workers_.get(), &env_);
    recovered_ = Decisions();
    recover_status_ = table_->Recover(&recovered_);
  }

  Decisions Join(const std::string& id) {
    EXPECT_TRUE(workers_->Register(id, id + ":7000", 0, env_.Now()).ok());
    Decisions d;
    table_->Schedule(&d);
    return d;
  }

  std::string Submit(const v1::JobSpec& spec) {
    Decisions d;
    absl::StatusOr<v1::Job> job = table_->Submit(spec, &d);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id() : "";
  }

  const v1::Job& Job(const std::string& id) {
    const v1::Job* job = table_->Find(id);
    EXPECT_NE(job, nullptr) << id;
    static const v1::Job* const kEmpty = new v1::Job();
    return job == nullptr ? *kEmpty : *job;
  }

  // Rank 0 (on `worker`) of a one-rank job reports epoch 1, then success.
  void RunOneRankToSuccess(const std::string& id, const std::string& worker) {
    Decisions d;
    v1::WorkerMessage::Progress p;
    p.set_job_id(id);
    p.set_step(50);
    table_->HandleProgress(worker, p, &d);
    v1::WorkerMessage::EpochDone e;
    e.set_job_id(id);
    e.set_epoch(1);
    e.set_train_loss(0.5);
    e.set_test_accuracy(0.83);
    table_->HandleEpochDone(worker, e, &d);
    v1::WorkerMessage::JobDone done = Done(id, 0);
    done.set_test_accuracy(0.83);
    table_->HandleJobDone(worker, done, &d);
  }

  std::vector<v1::JobEvent> AllEvents(const std::string& id) {
    WatchCursor cursor;
    std::vector<v1::JobEvent> events;
    EXPECT_TRUE(table_->ReadEvents(id, &cursor, &events).ok());
    return events;
  }

  const std::string dir_ = [] {
    char tmpl[] = "/tmp/gradsync-history-test-XXXXXX";
    return std::string(mkdtemp(tmpl));
  }();
  FakeEnv env_;
  std::unique_ptr<SqliteJobStore> sqlite_;
  std::unique_ptr<WorkerRegistry> workers_;
  std::unique_ptr<JobTable> table_;
  Decisions recovered_;
  absl::Status recover_status_;
};

// JobHistory on its own: a save carries the events not saved yet, without
// the timelines, and a failed save leaves them to the next one.
TEST(JobHistoryClassTest, SavesUnsavedEventsWithoutTracesAndRetriesAFailure) {
  RecordingStore store;
  JobHistory history(&store);
  JobEntry e;
  e.job.set_id("j-7");
  e.job.mutable_result()->add_traces()->set_rank(0);
  e.events.resize(2);
  ASSERT_TRUE(history.Save(&e).ok());
  ASSERT_EQ(store.saves.size(), 1u);
  EXPECT_EQ(store.saves[0].events.size(), 2u);
  EXPECT_EQ(store.saves[0].job.result().traces_size(), 0);  // kept out
  EXPECT_EQ(e.job.result().traces_size(), 1);               // kept in memory
  EXPECT_EQ(e.saved_events, 2u);
  e.events.resize(3);
  store.fail_saves = 1;
  EXPECT_FALSE(history.Save(&e).ok());
  EXPECT_EQ(e.saved_events, 2u);
  ASSERT_TRUE(history.Save(&e).ok());
  ASSERT_EQ(store.saves.size(), 2u);
  EXPECT_EQ(store.saves[1].events.size(), 1u);  // only the new one

  JobHistory memory_only(nullptr);
  EXPECT_FALSE(memory_only.enabled());
  e.events.resize(5);
  ASSERT_TRUE(memory_only.Save(&e).ok());
  EXPECT_EQ(e.saved_events, 5u);
  EXPECT_EQ(JobHistory::IdNumber("j-abc-42"), 42);
  EXPECT_EQ(JobHistory::IdNumber("j-x"), 0);
}

TEST_F(JobHistoryTest, AnEndedJobComesBackWithItsResultsAndEvents) {
  Restart("a-");
  Join("w0");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  RunOneRankToSuccess(id, "w0");
  ASSERT_EQ(Job(id).state(), v1::SUCCEEDED) << Job(id).error();
  const v1::Job before = Job(id);

  Restart("b-");
  ASSERT_TRUE(recover_status_.ok()) << recover_status_;
  ASSERT_EQ(table_->Jobs().size(), 1u);
  const v1::Job& after = Job(id);
  EXPECT_EQ(after.SerializeAsString(), before.SerializeAsString());
  ASSERT_EQ(after.result().epochs_size(), 1);
  EXPECT_DOUBLE_EQ(after.result().epochs(0).test_accuracy(), 0.83);
  EXPECT_DOUBLE_EQ(after.result().test_accuracy(), 0.83);
  // A watch of the old job replays its history and ends.
  WatchCursor cursor;
  std::vector<v1::JobEvent> events;
  absl::StatusOr<bool> ended = table_->ReadEvents(id, &cursor, &events);
  ASSERT_TRUE(ended.ok());
  EXPECT_TRUE(*ended);
  std::vector<std::string> seen;
  for (const v1::JobEvent& ev : events) {
    seen.push_back(ev.kind() == v1::JobEvent::EPOCH ? "epoch" : ev.message());
  }
  EXPECT_EQ(seen,
            (std::vector<std::string>{"queued", "running on w0", "epoch", "SUCCEEDED"}));
  EXPECT_TRUE(recovered_.sends.empty());
}

TEST_F(JobHistoryTest, RunningJobsFailAndQueuedJobsWaitForWorkers) {
  Restart("a-");
  Join("w0");
  const std::string running = Submit(Spec(v1::STRATEGY_PS, 1));
  const std::string queued = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  ASSERT_EQ(Job(running).state(), v1::RUNNING);
  ASSERT_EQ(Job(queued).state(), v1::QUEUED);

  Restart("b-");
  ASSERT_TRUE(recover_status_.ok()) << recover_status_;
  EXPECT_EQ(Job(running).state(), v1::FAILED);
  EXPECT_EQ(Job(running).error(), kCoordinatorRestarted);
  EXPECT_EQ(Job(running).error_code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_GT(Job(running).end_time_ms(), 0);
  EXPECT_EQ(AllEvents(running).back().message(), kCoordinatorRestarted);
  // Its PS shard is told to drop the job; no worker is live to cancel.
  ASSERT_EQ(recovered_.shard_end_jobs.size(), 1u);
  EXPECT_EQ(recovered_.shard_end_jobs[0].job_id, running);
  EXPECT_TRUE(recovered_.sends.empty());
  EXPECT_EQ(Job(queued).state(), v1::QUEUED);

  // The queued job runs once a worker registers.
  Decisions d = Join("w0");
  EXPECT_EQ(Job(queued).state(), v1::RUNNING);
  ASSERT_EQ(d.sends.size(), 1u);
  EXPECT_EQ(d.sends[0].message.assignment().job_id(), queued);

  // Both outcomes were saved: a second restart sees them, and fails the
  // job that is now running.
  Restart("c-");
  EXPECT_EQ(Job(running).error(), kCoordinatorRestarted);
  EXPECT_EQ(Job(queued).state(), v1::FAILED);
  EXPECT_EQ(Job(queued).error(), kCoordinatorRestarted);
}

TEST_F(JobHistoryTest, IdsContinueAfterTheLargestStoredId) {
  Restart("a-");
  EXPECT_EQ(Submit(Spec(v1::STRATEGY_ALLREDUCE, 5)), "j-a-1");
  EXPECT_EQ(Submit(Spec(v1::STRATEGY_ALLREDUCE, 5)), "j-a-2");
  EXPECT_EQ(Submit(Spec(v1::STRATEGY_ALLREDUCE, 5)), "j-a-3");
  Restart("b-");
  EXPECT_EQ(Submit(Spec(v1::STRATEGY_ALLREDUCE, 5)), "j-b-4");
  // Submission order survives too.
  std::vector<std::string> ids;
  for (const v1::Job* job : table_->Jobs()) ids.push_back(job->id());
  EXPECT_EQ(ids, (std::vector<std::string>{"j-a-1", "j-a-2", "j-a-3", "j-b-4"}));
}

TEST_F(JobHistoryTest, AQueuedJobThatNoLongerFitsTheServerFailsAtRecovery) {
  Restart("a-", {"ps0:1", "ps1:1"});
  v1::JobSpec spec = Spec(v1::STRATEGY_PS, 1);
  spec.set_ps_shards(2);
  const std::string id = Submit(spec);
  Restart("b-", {"ps0:1"});  // one shard fewer
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).error_code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Job(id).error().rfind("after a coordinator restart: ", 0), 0u)
      << Job(id).error();
  Decisions d = Join("w0");
  EXPECT_TRUE(d.sends.empty());
}

// Transitions and epochs are saved, one Save each, as they happen; step
// progress is not.
TEST_F(JobHistoryTest, EveryTransitionAndEpochIsSavedButNotProgress) {
  RecordingStore store;
  StartOn(&store, "a-");
  Join("w0");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  RunOneRankToSuccess(id, "w0");
  std::vector<std::pair<v1::JobState, size_t>> saved;
  for (const RecordingStore::SaveCall& s : store.saves) {
    saved.emplace_back(s.job.state(), s.events.size());
  }
  EXPECT_EQ(saved, (std::vector<std::pair<v1::JobState, size_t>>{
                       {v1::QUEUED, 1},     // submitted
                       {v1::RUNNING, 1},    // placed
                       {v1::RUNNING, 1},    // epoch 1
                       {v1::SUCCEEDED, 1},  // with its results
                   }));
  ASSERT_EQ(store.saves[2].events[0].kind(), v1::JobEvent::EPOCH);
  EXPECT_EQ(store.saves.back().job.result().epochs_size(), 1);
  EXPECT_EQ(store.saves.back().job.result().param_checksums(0), "c0ffee");
}

TEST_F(JobHistoryTest, ASubmissionThatCannotBeSavedIsRefused) {
  RecordingStore store;
  StartOn(&store, "a-");
  Join("w0");
  store.fail_saves = 1;
  Decisions d;
  absl::StatusOr<v1::Job> job = table_->Submit(Spec(v1::STRATEGY_ALLREDUCE, 1), &d);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(table_->Jobs().empty());
  EXPECT_TRUE(d.sends.empty());
  EXPECT_TRUE(workers_->Find("w0")->job_id.empty());
  // The next submission gets a new id and runs.
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  EXPECT_EQ(id, "j-a-2");
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

TEST_F(JobHistoryTest, EventsOfAFailedSaveAreSavedWithTheNextOne) {
  RecordingStore store;
  StartOn(&store, "a-");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  store.fail_saves = 1;
  Join("w0");  // placed: the RUNNING save fails, the job runs on
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Decisions d;
  ASSERT_TRUE(table_->Cancel(id, &d).ok());
  ASSERT_EQ(store.saves.size(), 2u);
  // What the queued job waited for (recorded after the submission's save),
  // then the RUNNING event of the failed save, then CANCELLED.
  ASSERT_EQ(store.saves[1].events.size(), 3u);
  EXPECT_EQ(store.saves[1].events[0].state(), v1::QUEUED);
  EXPECT_EQ(store.saves[1].events[0].message(), "needs 1 worker, 0 registered, 0 idle");
  EXPECT_EQ(store.saves[1].events[1].state(), v1::RUNNING);
  EXPECT_EQ(store.saves[1].events[2].state(), v1::CANCELLED);
}

TEST_F(JobHistoryTest, AStoreThatCannotBeReadFailsRecovery) {
  RecordingStore store;
  store.load_error = absl::DataLossError("jobs.db: stored job 'x' does not parse");
  StartOn(&store, "a-");
  EXPECT_EQ(recover_status_.code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace gradsync
