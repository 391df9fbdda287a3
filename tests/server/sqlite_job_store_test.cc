// SqliteJobStore on real files in a temporary directory: round trips, one
// transaction per Save, durability across a killed process, and the files it
// refuses at start-up (left byte-identical).
#include "server/coordinator/sqlite_job_store.h"

#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

using google::protobuf::util::MessageDifferencer;

std::string TempDir() {
  char tmpl[] = "/tmp/gradsync-store-test-XXXXXX";
  return mkdtemp(tmpl);
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Runs `sql` on the database file with a plain connection (no store open).
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
      << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

v1::Job MakeJob(const std::string& id, v1::JobState state) {
  v1::Job job;
  job.set_id(id);
  job.set_state(state);
  job.mutable_spec()->set_workers(2);
  job.mutable_spec()->set_model("mlp:784-10");
  job.set_submit_time_ms(1000);
  return job;
}

v1::JobEvent StateEvent(const v1::Job& job, const std::string& message) {
  v1::JobEvent ev;
  ev.set_kind(v1::JobEvent::STATE);
  ev.set_job_id(job.id());
  ev.set_state(job.state());
  ev.set_message(message);
  *ev.mutable_job() = job;
  return ev;
}

class SqliteJobStoreTest : public ::testing::Test {
 protected:
  ~SqliteJobStoreTest() override {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(dir_).parent_path(), ec);
  }

  std::unique_ptr<SqliteJobStore> Open() {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(dir_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  std::vector<StoredJob> Load(JobStore* store) {
    absl::StatusOr<std::vector<StoredJob>> jobs = store->LoadAll();
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    return jobs.ok() ? *std::move(jobs) : std::vector<StoredJob>{};
  }

  // Expects Open to fail with `code` and a message naming the database,
  // leaving its bytes as they were.
  void ExpectRefused(absl::StatusCode code, const std::string& says) {
    const std::string before = ReadBytes(db_path_);
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(dir_);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), code) << store.status();
    EXPECT_NE(store.status().message().find(says), std::string::npos) << store.status();
    EXPECT_EQ(store.status().message().find('\n'), std::string::npos);
    EXPECT_EQ(ReadBytes(db_path_), before) << "the refused file was changed";
  }

  const std::string dir_ = TempDir() + "/state";  // Open creates it
  const std::string db_path_ = dir_ + "/jobs.db";
};

TEST_F(SqliteJobStoreTest, RoundTripThroughAReopen) {
  v1::Job job = MakeJob("j-a-1", v1::QUEUED);
  std::vector<v1::JobEvent> events = {StateEvent(job, "queued")};
  {
    std::unique_ptr<SqliteJobStore> store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Save(job, events).ok());
    job.set_state(v1::RUNNING);
    job.add_workers("w0");
    events.push_back(StateEvent(job, "running"));
    ASSERT_TRUE(store->Save(job, {events.back()}).ok());
    job.set_state(v1::SUCCEEDED);
    v1::EpochResult* epoch = job.mutable_result()->add_epochs();
    epoch->set_epoch(1);
    epoch->set_test_accuracy(0.85);
    job.mutable_result()->set_test_accuracy(0.85);
    job.set_end_time_ms(5000);
    events.push_back(StateEvent(job, "SUCCEEDED"));
    ASSERT_TRUE(store->Save(job, {events.back()}).ok());
  }
  std::unique_ptr<SqliteJobStore> store = Open();
  ASSERT_NE(store, nullptr);
  std::vector<StoredJob> loaded = Load(store.get());
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_TRUE(MessageDifferencer::Equals(loaded[0].job, job))
      << loaded[0].job.DebugString();
  ASSERT_EQ(loaded[0].events.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_TRUE(MessageDifferencer::Equals(loaded[0].events[i], events[i])) << i;
  }
}

TEST_F(SqliteJobStoreTest, JobsLoadInTheOrderOfTheirFirstSave) {
  std::unique_ptr<SqliteJobStore> store = Open();
  ASSERT_NE(store, nullptr);
  for (const char* id : {"j-x-10", "j-x-9", "j-y-1"}) {
    ASSERT_TRUE(store->Save(MakeJob(id, v1::QUEUED), {}).ok());
  }
  ASSERT_TRUE(store->Save(MakeJob("j-x-10", v1::CANCELLED), {}).ok());
  std::vector<StoredJob> loaded = Load(store.get());
  ASSERT_EQ(loaded.size(), 3u);
  EXPECT_EQ(loaded[0].job.id(), "j-x-10");
  EXPECT_EQ(loaded[0].job.state(), v1::CANCELLED);
  EXPECT_EQ(loaded[1].job.id(), "j-x-9");
  EXPECT_EQ(loaded[2].job.id(), "j-y-1");
}

// A trigger makes the third event of a Save fail: neither the job's new
// state nor its first two events may be stored.
TEST_F(SqliteJobStoreTest, AFailedSaveStoresNothingOfIt) {
  v1::Job job = MakeJob("j-a-1", v1::QUEUED);
  {
    std::unique_ptr<SqliteJobStore> store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Save(job, {StateEvent(job, "queued")}).ok());
  }
  RawExec(db_path_,
          "CREATE TRIGGER fail_third BEFORE INSERT ON job_events "
          "WHEN NEW.idx >= 3 BEGIN SELECT RAISE(ABORT, 'injected'); END;");
  std::unique_ptr<SqliteJobStore> store = Open();
  ASSERT_NE(store, nullptr);
  v1::Job running = job;
  running.set_state(v1::RUNNING);
  const std::vector<v1::JobEvent> three = {
      StateEvent(running, "a"), StateEvent(running, "b"), StateEvent(running, "c")};
  absl::Status st = store->Save(running, three);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("injected"), std::string::npos) << st;
  std::vector<StoredJob> loaded = Load(store.get());
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].job.state(), v1::QUEUED);
  EXPECT_EQ(loaded[0].events.size(), 1u);
  // The store still works after the rolled-back transaction.
  EXPECT_TRUE(store->Save(running, {three[0]}).ok());
  EXPECT_EQ(Load(store.get())[0].events.size(), 2u);
}

// What a Save committed survives the process being killed right after
// (no close, no checkpoint).
TEST_F(SqliteJobStoreTest, ASaveSurvivesTheProcessBeingKilled) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(dir_);
    if (!store.ok()) _exit(3);
    v1::Job job = MakeJob("j-k-1", v1::RUNNING);
    if (!(*store)->Save(job, {StateEvent(job, "running")}).ok()) _exit(4);
    raise(SIGKILL);
    _exit(5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  std::unique_ptr<SqliteJobStore> store = Open();
  ASSERT_NE(store, nullptr);
  std::vector<StoredJob> loaded = Load(store.get());
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].job.state(), v1::RUNNING);
  EXPECT_EQ(loaded[0].events.size(), 1u);
}

TEST_F(SqliteJobStoreTest, AFileOfRandomBytesIsRefusedAndLeftUntouched) {
  ASSERT_EQ(mkdir(dir_.c_str(), 0755), 0);
  WriteBytes(db_path_, RandomBytes(64 << 10, 1));
  ExpectRefused(absl::StatusCode::kDataLoss, "is not an SQLite database");
  EXPECT_NE(access((db_path_ + "-wal").c_str(), F_OK), 0);
}

TEST_F(SqliteJobStoreTest, CorruptPagesBehindAValidHeaderAreRefusedUntouched) {
  {
    std::unique_ptr<SqliteJobStore> store = Open();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 50; ++i) {
      v1::Job job = MakeJob(absl::StrCat("j-c-", i), v1::QUEUED);
      ASSERT_TRUE(store->Save(job, {StateEvent(job, "queued")}).ok());
    }
  }  // closing checkpoints the WAL into jobs.db
  std::string bytes = ReadBytes(db_path_);
  ASSERT_GT(bytes.size(), 4096u);
  // Keep the 100-byte file header, scramble every page behind it.
  bytes.replace(100, bytes.size() - 100, RandomBytes(bytes.size() - 100, 2));
  WriteBytes(db_path_, bytes);
  ExpectRefused(absl::StatusCode::kDataLoss, db_path_);
}

TEST_F(SqliteJobStoreTest, ANewerSchemaIsRefusedUntouched) {
  { ASSERT_NE(Open(), nullptr); }
  RawExec(db_path_, "UPDATE schema_version SET version = 2");
  ExpectRefused(absl::StatusCode::kFailedPrecondition, "schema version 2");
}

TEST_F(SqliteJobStoreTest, AnotherSqliteDatabaseIsRefusedUntouched) {
  ASSERT_EQ(mkdir(dir_.c_str(), 0755), 0);
  RawExec(db_path_, "CREATE TABLE notes (text TEXT)");
  ExpectRefused(absl::StatusCode::kFailedPrecondition, "not a gradsync job history");
}

TEST_F(SqliteJobStoreTest, ASecondOpenOfTheSameDirectoryIsRefused) {
  std::unique_ptr<SqliteJobStore> first = Open();
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> second = SqliteJobStore::Open(dir_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition)
      << second.status();
  // The first one still writes.
  EXPECT_TRUE(first->Save(MakeJob("j-a-1", v1::QUEUED), {}).ok());
}

TEST_F(SqliteJobStoreTest, AStateDirectoryThatCannotBeCreatedIsRefused) {
  const std::string file =
      (std::filesystem::path(dir_).parent_path() / "a-file").string();
  WriteBytes(file, "x");
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store =
      SqliteJobStore::Open(file + "/state");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(store.status().message().find(file), std::string::npos) << store.status();
}

TEST_F(SqliteJobStoreTest, AReadOnlyStateDirectoryIsRefused) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes to read-only directories";
  ASSERT_EQ(mkdir(dir_.c_str(), 0555), 0);
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(dir_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(store.status().message().find("not writable"), std::string::npos)
      << store.status();
}

TEST_F(SqliteJobStoreTest, PruneKeepsTheNewestEndedAndEveryUnendedJob) {
  std::unique_ptr<SqliteJobStore> store = Open();
  ASSERT_NE(store, nullptr);
  const std::vector<std::pair<std::string, v1::JobState>> saved = {
      {"j-1", v1::SUCCEEDED}, {"j-2", v1::RUNNING}, {"j-3", v1::FAILED},
      {"j-4", v1::CANCELLED}, {"j-5", v1::QUEUED},  {"j-6", v1::SUCCEEDED}};
  for (const auto& [id, state] : saved) {
    v1::Job job = MakeJob(id, state);
    ASSERT_TRUE(store->Save(job, {StateEvent(job, "x"), StateEvent(job, "y")}).ok());
  }
  ASSERT_TRUE(store->PruneEnded(2).ok());
  std::vector<std::string> ids;
  size_t events = 0;
  for (const StoredJob& j : Load(store.get())) {
    ids.push_back(j.job.id());
    events += j.events.size();
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"j-2", "j-4", "j-5", "j-6"}));
  EXPECT_EQ(events, 8u);
  // The pruned jobs' events are gone from the file, not only unlisted.
  RawExec(db_path_, "SELECT 1");  // the file is readable by a plain client
  store.reset();
  store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(Load(store.get()).size(), 4u);
  ASSERT_TRUE(store->PruneEnded(100).ok());  // nothing beyond: a no-op
  EXPECT_EQ(Load(store.get()).size(), 4u);
}

}  // namespace
}  // namespace gradsync
