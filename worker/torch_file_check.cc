#include "worker/torch_file_check.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "worker/model/device_factory.h"

namespace gradsync {
namespace {

constexpr char kFlag[] = "--check_torch_file=";
constexpr size_t kMaxMessage = 4096;

// The helper's stderr, kept short: its last line is the error.
std::string LastLine(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const size_t nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

}  // namespace

absl::Status CheckTorchFile(const std::string& arg) {
  std::vector<std::string> parts = absl::StrSplit(arg, absl::MaxSplits(':', 1));
  if (parts.size() == 2 && parts[0] == "data") {
    return LoadTensorDataFile(parts[1]).status();
  }
  parts = absl::StrSplit(arg, absl::MaxSplits(':', 3));
  int features = 0, classes = 0;
  if (parts.size() == 4 && parts[0] == "model" && absl::SimpleAtoi(parts[1], &features) &&
      absl::SimpleAtoi(parts[2], &classes)) {
    DeviceRequest req;
    req.source = ModelSource::kTorchScript;
    req.torchscript_path = parts[3];
    req.features = features;
    req.classes = classes;
    req.cpu_threads = 1;
    return MakeDeviceModel(req).status();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(kFlag, " takes data:PATH or model:FEATURES:CLASSES:PATH"));
}

namespace {

// The helper's address-space limit: the given one, or 4 GiB + 8x the file
// (the last field of the argument).
uint64_t LimitOf(const TorchFileCheck& check) {
  if (check.max_address_space > 0) return check.max_address_space;
  const std::vector<std::string> parts = absl::StrSplit(
      check.arg, absl::MaxSplits(':', absl::StartsWith(check.arg, "data:") ? 1 : 3));
  struct stat st {};
  const uint64_t size = ::stat(parts.back().c_str(), &st) == 0 ? st.st_size : 0;
  return (4ull << 30) + 8 * size;
}

// Starts the helper under `limit`, its stderr into *err_fd (the read end).
absl::StatusOr<pid_t> Spawn(const TorchFileCheck& check, uint64_t limit, int* err_fd) {
  // Everything the child needs, made before fork (it may only exec after).
  const std::string flag = absl::StrCat(kFlag, check.arg);
  const std::string plugin = absl::StrCat("--torch_plugin=", check.torch_plugin);
  std::vector<char*> argv = {const_cast<char*>(check.helper.c_str()),
                             const_cast<char*>(flag.c_str()),
                             const_cast<char*>("--log_level=error")};
  if (!check.torch_plugin.empty()) argv.push_back(const_cast<char*>(plugin.c_str()));
  argv.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    ::dup2(fds[1], 2);
    const int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
    }
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = limit;
    ::setrlimit(RLIMIT_AS, &rl);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  *err_fd = fds[0];
  return pid;
}

// Reads `fd` to its end into *out (bounded), or until the deadline; false
// when the deadline passed first. Closes `fd`.
bool ReadUntilEnd(int fd, absl::Time deadline, const Env* env, std::string* out) {
  bool in_time = true;
  for (;;) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - env->NowMonotonic());
    if (left_ms <= 0) {
      in_time = false;
      break;
    }
    struct pollfd p = {fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (r <= 0) continue;  // EINTR or a second without output
    char buf[1024];
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the helper exited
    if (out->size() < 64 * kMaxMessage) out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return in_time;
}

}  // namespace

absl::Status CheckTorchFileInHelper(const TorchFileCheck& check) {
  const uint64_t limit = LimitOf(check);
  int err_fd = -1;
  absl::StatusOr<pid_t> pid = Spawn(check, limit, &err_fd);
  if (!pid.ok()) return pid.status();
  std::string out;
  const bool in_time =
      ReadUntilEnd(err_fd, check.env->NowMonotonic() + check.timeout, check.env, &out);
  if (!in_time) ::kill(*pid, SIGKILL);
  int status = 0;
  while (::waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!in_time) {
    return absl::DeadlineExceededError(absl::StrCat("reading the file took longer than ",
                                                    absl::FormatDuration(check.timeout)));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  const std::string said = LastLine(out).substr(0, kMaxMessage);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 1 && !said.empty() &&
      said.find("bad_alloc") == std::string::npos &&
      said.find("allocate") == std::string::npos) {
    return absl::InvalidArgumentError(said);
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("reading the file needed more than ", limit >> 20,
                   " MiB of memory or crashed the reader (",
                   WIFSIGNALED(status) ? absl::StrCat("signal ", WTERMSIG(status))
                                       : absl::StrCat("exit ", WEXITSTATUS(status)),
                   said.empty() ? "" : absl::StrCat(": ", said), ")"));
}

}  // namespace gradsync
