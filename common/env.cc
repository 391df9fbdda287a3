// The real Env: Abseil's clock and waits, POSIX files.
#include "common/env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace gradsync {
namespace {

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(path, ": ", what, ": ", std::strerror(errno)));
}

bool WriteAll(int fd, absl::string_view bytes) {
  const char* p = bytes.data();
  size_t n = bytes.size();
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

absl::Status SyncParentDirectory(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return IoError("open directory", dir);
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok ? absl::OkStatus() : IoError("fsync directory", dir);
}

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixSequentialFile() override { ::close(fd_); }

  absl::StatusOr<size_t> Read(char* scratch, size_t n) override {
    while (true) {
      const ssize_t r = ::read(fd_, scratch, n);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno != EINTR) return IoError("read", path_);
    }
  }
  uint64_t size() const override { return size_; }

 private:
  const std::string path_;
  const int fd_;
  const uint64_t size_;
};

class PosixEnv final : public Env {
 public:
  absl::Time Now() const override { return absl::Now(); }

  absl::Time NowMonotonic() const override {
    return absl::UnixEpoch() +
           absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
  }

  void SleepFor(absl::Duration d) const override { absl::SleepFor(d); }

  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return mu->AwaitWithDeadline(cond, deadline);
  }
};

}  // namespace

const Env* Env::Default() {
  static const Env* const env = new PosixEnv();
  return env;
}

// O_NONBLOCK: opening a FIFO for reading does not wait for a writer, so
// that it can be refused by its type like any other file that is not a
// regular one (on a regular file the flag changes nothing).
absl::StatusOr<std::unique_ptr<SequentialFile>> Env::NewSequentialFile(
    const std::string& path) const {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " not found"));
    return IoError("open", path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status err = IoError("stat", path);
    ::close(fd);
    return err;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a regular file (",
                     S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a plain file",
                     ")"));
  }
  return std::unique_ptr<SequentialFile>(
      new PosixSequentialFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

absl::StatusOr<std::string> Env::ReadFileToString(const std::string& path) const {
  absl::StatusOr<std::unique_ptr<SequentialFile>> f = NewSequentialFile(path);
  if (!f.ok()) return f.status();
  // The size it had when opened, in place; then whatever it grew by since.
  std::string bytes(static_cast<size_t>((*f)->size()), '\0');
  size_t have = 0;
  while (have < bytes.size()) {
    absl::StatusOr<size_t> n = (*f)->Read(bytes.data() + have, bytes.size() - have);
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    have += *n;
  }
  bytes.resize(have);
  char tail[1 << 14];
  while (true) {
    absl::StatusOr<size_t> n = (*f)->Read(tail, sizeof(tail));
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    bytes.append(tail, *n);
  }
  return bytes;
}

absl::Status Env::WriteFileAtomically(const std::string& path,
                                      absl::string_view contents) const {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return IoError("create", tmp);
  absl::Status st;
  if (!WriteAll(fd, contents)) st = IoError("write", tmp);
  if (st.ok() && ::fsync(fd) != 0) st = IoError("fsync", tmp);
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = IoError("rename to its final name", tmp);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return SyncParentDirectory(path);
}

bool Env::FileExists(const std::string& path) const {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::Status Env::CreateDirectories(const std::string& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat(dir, ": create directory: ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace gradsync
