// SqliteJobStore (see sqlite_job_store.h): opening with its checks, the
// schema, and one transaction per Save.
#include "server/coordinator/sqlite_job_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

// The first 16 bytes of every SQLite 3 database file (with its NUL).
constexpr char kSqliteHeader[16] = "SQLite format 3";

constexpr char kSchema[] = R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE jobs (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  state TEXT NOT NULL,
  submit_time_ms INTEGER NOT NULL,
  start_time_ms INTEGER NOT NULL,
  end_time_ms INTEGER NOT NULL,
  error_code INTEGER NOT NULL,
  error TEXT NOT NULL,
  job BLOB NOT NULL
);
CREATE TABLE job_events (
  job_id TEXT NOT NULL REFERENCES jobs(id),
  idx INTEGER NOT NULL,
  event BLOB NOT NULL,
  PRIMARY KEY (job_id, idx)
);
)sql";

constexpr char kUpsertJob[] = R"sql(
INSERT INTO jobs (id, state, submit_time_ms, start_time_ms, end_time_ms,
                  error_code, error, job)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (id) DO UPDATE SET
  state = excluded.state, submit_time_ms = excluded.submit_time_ms,
  start_time_ms = excluded.start_time_ms, end_time_ms = excluded.end_time_ms,
  error_code = excluded.error_code, error = excluded.error, job = excluded.job
)sql";

constexpr char kAppendEvent[] = R"sql(
INSERT INTO job_events (job_id, idx, event)
VALUES (?1, (SELECT count(*) FROM job_events WHERE job_id = ?1), ?2)
)sql";

struct Finalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, Finalizer>;

// "<path>: <what>: <SQLite's message>", coded by SQLite's primary result.
absl::Status SqliteStatus(const std::string& path, sqlite3* db, int rc,
                          absl::string_view what) {
  const std::string msg = absl::StrCat(
      path, ": ", what, ": ", db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::FailedPreconditionError(
          absl::StrCat(msg,
                       " (held by another process: another gradsync-server with "
                       "this --state_dir?)"));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
    case SQLITE_AUTH:
      return absl::PermissionDeniedError(msg);
    case SQLITE_FULL:
    case SQLITE_IOERR:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status MakeStateDir(const std::string& dir, const Env* env) {
  absl::Status made = env->CreateDirectories(dir);
  std::error_code ec;
  if (!made.ok() || !std::filesystem::is_directory(dir, ec)) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create state directory ", dir, ": ",
                     !made.ok() ? std::string(made.message()) : "not a directory"));
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "state directory ", dir, " is not writable: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Step 2 of Open: read-only look at the first bytes, so that a file that is
// not SQLite is refused before SQLite opens (and could write) it.
absl::Status CheckHeader(const std::string& path, const Env* env) {
  absl::StatusOr<std::unique_ptr<SequentialFile>> in = env->NewSequentialFile(path);
  // Not a regular file (a FIFO, a directory): SQLite would block or fail.
  if (absl::IsFailedPrecondition(in.status())) return in.status();
  if (!in.ok()) return absl::OkStatus();  // missing: created; unreadable: step 3
  char head[sizeof(kSqliteHeader)] = {};
  size_t n = 0;
  while (n < sizeof(head)) {
    absl::StatusOr<size_t> got = (*in)->Read(head + n, sizeof(head) - n);
    if (!got.ok() || *got == 0) break;
    n += *got;
  }
  if (n == 0) return absl::OkStatus();  // empty: SQLite's empty database
  if (n < sizeof(head) || std::memcmp(head, kSqliteHeader, sizeof(head)) != 0) {
    return absl::DataLossError(
        absl::StrCat(path,
                     " is not an SQLite database (corrupt or foreign file); left "
                     "untouched: move it away or pass another --state_dir"));
  }
  return absl::OkStatus();
}

// The first column of the first row of `sql` as text ("" without rows).
absl::StatusOr<std::string> QueryText(sqlite3* db, const std::string& path,
                                      const char* sql, const char* what) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &raw, nullptr);
  Stmt stmt(raw);
  if (rc != SQLITE_OK) return SqliteStatus(path, db, rc, what);
  rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_DONE) return std::string();
  if (rc != SQLITE_ROW) return SqliteStatus(path, db, rc, what);
  const unsigned char* text = sqlite3_column_text(stmt.get(), 0);
  return text == nullptr ? std::string()
                         : std::string(reinterpret_cast<const char*>(text));
}

}  // namespace

void SqliteJobStore::Closer::operator()(sqlite3* db) const { sqlite3_close_v2(db); }

SqliteJobStore::SqliteJobStore(std::string path, Db db)
    : path_(std::move(path)), db_(std::move(db)) {}

absl::StatusOr<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(
    const std::string& dir, const Env* env) {
  if (absl::Status st = MakeStateDir(dir, env); !st.ok()) return st;
  const std::string path = (std::filesystem::path(dir) / kFileName).string();
  if (absl::Status st = CheckHeader(path, env); !st.ok()) return st;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  Db db(raw);  // closed on every return below unless the store takes it
  if (rc != SQLITE_OK) return SqliteStatus(path, db.get(), rc, "cannot open");
  if (sqlite3_db_readonly(db.get(), "main") == 1) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, " is read-only; the job history must be writable"));
  }
  std::unique_ptr<SqliteJobStore> store(new SqliteJobStore(path, std::move(db)));
  {
    absl::MutexLock lock(&store->mu_);
    if (absl::Status st = store->CheckAndPrepare(); !st.ok()) return st;
  }
  return store;
}

absl::Status SqliteJobStore::Exec(const char* sql, const char* what) {
  const int rc = sqlite3_exec(db_.get(), sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? absl::OkStatus() : SqliteStatus(path_, db_.get(), rc, what);
}

absl::Status SqliteJobStore::CheckAndPrepare() {
  absl::Status st = Exec("PRAGMA locking_mode=EXCLUSIVE", "locking_mode");
  if (!st.ok()) return st;
  absl::StatusOr<std::string> check =
      QueryText(db_.get(), path_, "PRAGMA quick_check(1)", "quick_check");
  if (!check.ok()) return check.status();
  if (*check != "ok") {
    return absl::DataLossError(
        absl::StrCat(path_, ": integrity check failed (", *check,
                     "); left untouched: move it away or pass another --state_dir"));
  }
  bool empty = false;
  if (st = CheckSchemaVersion(&empty); !st.ok()) return st;
  absl::StatusOr<std::string> mode =
      QueryText(db_.get(), path_, "PRAGMA journal_mode=WAL", "journal_mode");
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") {
    return absl::FailedPreconditionError(absl::StrCat(
        path_, ": cannot use write-ahead logging (journal mode stays ", *mode, ")"));
  }
  if (st = Exec("PRAGMA synchronous=NORMAL", "synchronous"); !st.ok()) return st;
  // Takes the write lock now, so that a second server fails at start-up.
  if (st = Exec("BEGIN IMMEDIATE", "lock"); !st.ok()) return st;
  if (empty) {
    st = Exec(kSchema, "create schema");
    if (st.ok()) {
      const std::string insert = absl::StrCat(
          "INSERT INTO schema_version (version) VALUES (", kSchemaVersion, ")");
      st = Exec(insert.c_str(), "create schema");
    }
  }
  if (st.ok()) st = Exec("COMMIT", "create schema");
  if (!st.ok()) sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
  return st;
}

absl::Status SqliteJobStore::CheckSchemaVersion(bool* empty) {
  absl::StatusOr<std::string> has =
      QueryText(db_.get(), path_,
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                "name = 'schema_version'",
                "read schema");
  if (!has.ok()) return has.status();
  if (*has == "0") {
    absl::StatusOr<std::string> tables =
        QueryText(db_.get(), path_, "SELECT count(*) FROM sqlite_master", "read schema");
    if (!tables.ok()) return tables.status();
    *empty = *tables == "0";
    if (*empty) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(path_,
                     " is an SQLite database but not a gradsync job history (no "
                     "schema_version table); left untouched"));
  }
  absl::StatusOr<std::string> text = QueryText(
      db_.get(), path_, "SELECT max(version) FROM schema_version", "read schema");
  if (!text.ok()) return text.status();
  int version = 0;
  if (!absl::SimpleAtoi(*text, &version) || version < 1) {
    return absl::DataLossError(
        absl::StrCat(path_, ": bad schema version '", *text, "'; left untouched"));
  }
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, " has schema version ", version,
                     ", newer than this gradsync-server knows (", kSchemaVersion,
                     "); left untouched: run a newer gradsync-server"));
  }
  *empty = false;
  return absl::OkStatus();
}

absl::Status SqliteJobStore::Save(const v1::Job& job,
                                  absl::Span<const v1::JobEvent> new_events) {
  absl::MutexLock lock(&mu_);
  absl::Status st = Exec("BEGIN IMMEDIATE", "save: begin");
  if (!st.ok()) return st;
  st = UpsertJob(job);
  if (st.ok()) st = AppendEvents(job.id(), new_events);
  if (st.ok()) st = Exec("COMMIT", "save: commit");
  if (!st.ok()) sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
  return st;
}

absl::Status SqliteJobStore::UpsertJob(const v1::Job& job) {
  sqlite3* db = db_.get();
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db, kUpsertJob, -1, &raw, nullptr);
  Stmt stmt(raw);
  if (rc != SQLITE_OK) return SqliteStatus(path_, db, rc, "save job");
  const std::string blob = job.SerializeAsString();
  const std::string& state = v1::JobState_Name(job.state());
  sqlite3_bind_text(raw, 1, job.id().data(), job.id().size(), SQLITE_TRANSIENT);
  sqlite3_bind_text(raw, 2, state.data(), state.size(), SQLITE_TRANSIENT);
  sqlite3_bind_int64(raw, 3, job.submit_time_ms());
  sqlite3_bind_int64(raw, 4, job.start_time_ms());
  sqlite3_bind_int64(raw, 5, job.end_time_ms());
  sqlite3_bind_int(raw, 6, job.error_code());
  sqlite3_bind_text(raw, 7, job.error().data(), job.error().size(), SQLITE_TRANSIENT);
  sqlite3_bind_blob(raw, 8, blob.data(), blob.size(), SQLITE_TRANSIENT);
  rc = sqlite3_step(raw);
  return rc == SQLITE_DONE ? absl::OkStatus() : SqliteStatus(path_, db, rc, "save job");
}

absl::Status SqliteJobStore::AppendEvents(const std::string& job_id,
                                          absl::Span<const v1::JobEvent> events) {
  if (events.empty()) return absl::OkStatus();
  sqlite3* db = db_.get();
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db, kAppendEvent, -1, &raw, nullptr);
  Stmt stmt(raw);
  if (rc != SQLITE_OK) return SqliteStatus(path_, db, rc, "save events");
  sqlite3_bind_text(raw, 1, job_id.data(), job_id.size(), SQLITE_TRANSIENT);
  for (const v1::JobEvent& ev : events) {
    const std::string blob = ev.SerializeAsString();
    sqlite3_bind_blob(raw, 2, blob.data(), blob.size(), SQLITE_TRANSIENT);
    rc = sqlite3_step(raw);
    if (rc != SQLITE_DONE) return SqliteStatus(path_, db, rc, "save events");
    sqlite3_reset(raw);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StoredJob>> SqliteJobStore::LoadAll() {
  absl::MutexLock lock(&mu_);
  sqlite3* db = db_.get();
  std::vector<StoredJob> jobs;
  std::map<std::string, size_t> index;
  sqlite3_stmt* raw = nullptr;
  int rc =
      sqlite3_prepare_v2(db, "SELECT id, job FROM jobs ORDER BY seq", -1, &raw, nullptr);
  Stmt stmt(raw);
  if (rc != SQLITE_OK) return SqliteStatus(path_, db, rc, "load jobs");
  while ((rc = sqlite3_step(raw)) == SQLITE_ROW) {
    const std::string id(reinterpret_cast<const char*>(sqlite3_column_text(raw, 0)));
    StoredJob s;
    if (!s.job.ParseFromArray(sqlite3_column_blob(raw, 1),
                              sqlite3_column_bytes(raw, 1)) ||
        s.job.id() != id) {
      return absl::DataLossError(
          absl::StrCat(path_, ": stored job '", id, "' does not parse"));
    }
    index[id] = jobs.size();
    jobs.push_back(std::move(s));
  }
  if (rc != SQLITE_DONE) return SqliteStatus(path_, db, rc, "load jobs");
  rc = sqlite3_prepare_v2(db, "SELECT job_id, event FROM job_events ORDER BY job_id, idx",
                          -1, &raw, nullptr);
  stmt.reset(raw);
  if (rc != SQLITE_OK) return SqliteStatus(path_, db, rc, "load events");
  while ((rc = sqlite3_step(raw)) == SQLITE_ROW) {
    const std::string id(reinterpret_cast<const char*>(sqlite3_column_text(raw, 0)));
    v1::JobEvent ev;
    auto it = index.find(id);
    if (it == index.end() ||
        !ev.ParseFromArray(sqlite3_column_blob(raw, 1), sqlite3_column_bytes(raw, 1))) {
      return absl::DataLossError(
          absl::StrCat(path_, ": a stored event of job '", id, "' does not parse"));
    }
    jobs[it->second].events.push_back(std::move(ev));
  }
  if (rc != SQLITE_DONE) return SqliteStatus(path_, db, rc, "load events");
  return jobs;
}

absl::Status SqliteJobStore::PruneEnded(size_t keep) {
  // The ended jobs beyond the newest `keep`, in first-save order.
  const std::string old = absl::StrCat(
      "SELECT id FROM jobs WHERE state IN ('SUCCEEDED', 'FAILED', "
      "'CANCELLED') ORDER BY seq DESC LIMIT -1 OFFSET ",
      keep);
  const std::string events =
      absl::StrCat("DELETE FROM job_events WHERE job_id IN (", old, ")");
  const std::string jobs = absl::StrCat("DELETE FROM jobs WHERE id IN (", old, ")");
  absl::MutexLock lock(&mu_);
  absl::Status st = Exec("BEGIN IMMEDIATE", "prune: begin");
  if (!st.ok()) return st;
  st = Exec(events.c_str(), "prune events");
  if (st.ok()) st = Exec(jobs.c_str(), "prune jobs");
  if (st.ok()) st = Exec("COMMIT", "prune: commit");
  if (!st.ok()) sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
  return st;
}

}  // namespace gradsync
