// The one source of time (and of whole-file reads and writes) for the
// worker, the PS and the coordinator, injected so that deadline, timeout,
// backoff and stall logic can be tested on a clock the test moves
// (common/testing/fake_env.h) instead of by sleeping. As LevelDB's Env.
//
// Rule (checked by .ci/check-env.sh): nothing in worker/ or server/ calls
// absl::Now(), absl::SleepFor, std::this_thread::sleep_for, (u)sleep or a
// std::chrono clock's now(); it asks its Env.
//
// Waits: a wait on a mutex whose deadline is computed from Env::Now() goes
// through Env::AwaitWithDeadline / AwaitWithTimeout, so that a fake clock
// drives the deadline and the clock reads consistently. Left on the mutex
// (absl::Mutex::AwaitWithTimeout, CondVar::WaitWithTimeout) are only waits
// with a fixed real period whose expiry decides nothing by itself, which then
// re-read Env::Now() to decide: the peer mailboxes' reaper
// (worker/collectives/transport/grpc/peer_mailboxes.cc: every 200 ms) and
// the coordinator's monitor and watch polls (server/coordinator/
// coordinator.cc: kMonitorPeriod, kWatchPoll).
//
// gRPC deadlines (ClientContext::set_deadline, Server::Shutdown) are real
// time: compute them from Env::Now() of the real Env; a fake Env's time
// given to gRPC means nothing to it.
#ifndef GRADSYNC_COMMON_ENV_H_
#define GRADSYNC_COMMON_ENV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gradsync {

// A file read from its start to its end, a piece at a time (LevelDB's
// SequentialFile). One thread at a time.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Reads up to `n` bytes into `scratch`: how many it read, 0 at the end.
  // INTERNAL naming the file on an I/O error.
  virtual absl::StatusOr<size_t> Read(char* scratch, size_t n) = 0;
  // The file's size when it was opened.
  virtual uint64_t size() const = 0;
};

// Threading: every method may be called from any thread, concurrently; an
// Env outlives every object it was given to (Env::Default() is never
// destroyed).
class Env {
 public:
  virtual ~Env() = default;

  // The real one: absl::Now(), absl::SleepFor, absl::Mutex's waits, POSIX
  // files. Never destroyed.
  static const Env* Default();

  // Wall-clock time.
  virtual absl::Time Now() const = 0;

  // A clock that never steps back, for measuring intervals (benchmarks):
  // only differences between its readings mean anything.
  virtual absl::Time NowMonotonic() const = 0;

  // Blocks the calling thread for `d` (returns at once for d <= 0).
  virtual void SleepFor(absl::Duration d) const = 0;

  // As absl::Mutex::AwaitWithDeadline: `mu` is held by the caller (and still
  // held on return); blocks until `cond` holds or Now() reaches `deadline`.
  // Returns whether `cond` holds.
  virtual bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                 absl::Time deadline) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;

  // AwaitWithDeadline(mu, cond, Now() + timeout).
  bool AwaitWithTimeout(absl::Mutex* mu, const absl::Condition& cond,
                        absl::Duration timeout) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return AwaitWithDeadline(mu, cond, Now() + timeout);
  }

  // Files: checkpoints (common/checkpoint.h), uploaded and fetched blobs
  // (common/content_store.h), data files, the coordinator's history.
  //
  // Only regular files are read: a FIFO, a device such as /dev/zero or a
  // directory is FAILED_PRECONDITION naming the path, at once, never an
  // open that blocks or a read that does not end. NOT_FOUND when the file
  // does not exist, INTERNAL naming the file on another error.
  virtual absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) const;

  // The whole of file `path` (a regular file, as NewSequentialFile).
  virtual absl::StatusOr<std::string> ReadFileToString(const std::string& path) const;

  // Writes `contents` to `path` atomically: <path>.tmp, fsync, rename, fsync
  // the directory (a crash leaves the old file or the new one). INTERNAL
  // naming the file on an I/O error (the temporary file is removed).
  virtual absl::Status WriteFileAtomically(const std::string& path,
                                           absl::string_view contents) const;

  virtual bool FileExists(const std::string& path) const;

  // Creates directory `dir` and its missing parents (OK when it exists).
  // INTERNAL naming the directory on an error.
  virtual absl::Status CreateDirectories(const std::string& dir) const;
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_ENV_H_
