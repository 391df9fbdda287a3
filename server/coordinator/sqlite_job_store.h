// JobStore on SQLite (Debian's libsqlite3): one database file,
// <state dir>/jobs.db, written only by the coordinator.
//
// Schema (version kSchemaVersion, recorded in table schema_version):
//   jobs(seq INTEGER PRIMARY KEY, id TEXT UNIQUE, state TEXT,
//        submit_time_ms, start_time_ms, end_time_ms, error_code, error,
//        job BLOB)            -- gradsync.v1.Job, serialized; seq = save order
//   job_events(job_id, idx, event BLOB)  -- gradsync.v1.JobEvent, in order
// state, timestamps and error are copies of the Job's fields, so that the
// history can be listed with the sqlite3 shell (when no server holds it).
//
// Durability: journal_mode=WAL with synchronous=NORMAL. A commit appends to
// the WAL without fsync (fsync happens at checkpoints), so a commit never
// waits on the disk while the coordinator holds its mutex. A committed
// transaction survives the process dying (kill -9, crash), which is the
// restart this history exists for; an OS crash or power loss may lose the
// last commits, but never corrupts the file (SQLite's WAL guarantee).
// FULL would add an fsync per state change for that last case only.
//
// The connection uses locking_mode=EXCLUSIVE: while a server has the file
// open, a second server on the same --state_dir is refused at start-up
// instead of writing a second history into it.
#ifndef GRADSYNC_SERVER_COORDINATOR_SQLITE_JOB_STORE_H_
#define GRADSYNC_SERVER_COORDINATOR_SQLITE_JOB_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "server/coordinator/job_store.h"

struct sqlite3;

namespace gradsync {

class SqliteJobStore final : public JobStore {
 public:
  static constexpr int kSchemaVersion = 1;
  static constexpr char kFileName[] = "jobs.db";

  // Opens <dir>/jobs.db, creating `dir` (with parents) and the database when
  // missing. Nothing is written to an existing file before it has passed
  // steps 2-5:
  //   1. create `dir`; PERMISSION_DENIED (naming it) when it cannot be
  //      created or written;
  //   2. an existing non-empty file must start with SQLite's header, else
  //      DATA_LOSS "... is not an SQLite database" (FAILED_PRECONDITION
  //      when it is not a regular file: a FIFO, a directory);
  //   3. open read-write with the exclusive lock; PERMISSION_DENIED for a
  //      read-only file, FAILED_PRECONDITION when another process holds it;
  //   4. PRAGMA quick_check; DATA_LOSS with SQLite's first complaint;
  //   5. schema_version: newer than kSchemaVersion is FAILED_PRECONDITION
  //      (written by a newer gradsync-server), tables without it are
  //      FAILED_PRECONDITION (not a gradsync database);
  //   6. WAL, synchronous=NORMAL, and the schema of an empty database.
  // Every error message names the file and fits on one line. Steps 1 and 2
  // go through `env` (the directory, the header's read); SQLite does its
  // own file I/O from step 3 on.
  static absl::StatusOr<std::unique_ptr<SqliteJobStore>> Open(
      const std::string& dir, const Env* env = Env::Default());

  ~SqliteJobStore() override = default;
  SqliteJobStore(const SqliteJobStore&) = delete;
  SqliteJobStore& operator=(const SqliteJobStore&) = delete;

  absl::StatusOr<std::vector<StoredJob>> LoadAll() override;
  absl::Status Save(const v1::Job& job,
                    absl::Span<const v1::JobEvent> new_events) override;
  // One transaction; the error names the file.
  absl::Status PruneEnded(size_t keep) override;

  const std::string& path() const { return path_; }

 private:
  struct Closer {
    void operator()(sqlite3* db) const;
  };
  using Db = std::unique_ptr<sqlite3, Closer>;

  SqliteJobStore(std::string path, Db db);

  // Steps 4-6 of Open.
  absl::Status CheckAndPrepare() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckSchemaVersion(bool* empty) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Save's statements, inside the transaction Save opened.
  absl::Status UpsertJob(const v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AppendEvents(const std::string& job_id,
                            absl::Span<const v1::JobEvent> events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs SQL without results; the error names `what`.
  absl::Status Exec(const char* sql, const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;  // constant after construction
  absl::Mutex mu_;
  const Db db_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_SQLITE_JOB_STORE_H_
