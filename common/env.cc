// The real Env: Abseil's clock and waits, POSIX files.
#include "common/env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

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

absl::StatusOr<std::string> Env::ReadFileToString(const std::string& path) const {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    if (!FileExists(path)) return absl::NotFoundError(absl::StrCat(path, " not found"));
    return IoError("open", path);
  }
  std::string bytes(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    return absl::InternalError(absl::StrCat(path, ": read failed"));
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
