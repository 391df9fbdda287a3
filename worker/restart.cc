#include "worker/restart.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gradsync {

absl::Status RestartSelf(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::FailedPreconditionError("no command line to restart");
  if (DIR* d = opendir("/proc/self/fd")) {
    const int own = dirfd(d);
    while (dirent* e = readdir(d)) {
      int fd = -1;
      if (!absl::SimpleAtoi(e->d_name, &fd) || fd <= 2 || fd == own) continue;
      const int flags = fcntl(fd, F_GETFD);
      if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
    closedir(d);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv("/proc/self/exe", args.data());
  return absl::InternalError(
      absl::StrCat("execv(/proc/self/exe): ", std::strerror(errno)));
}

namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

// Laid out by RestartOnFatalSignals and never freed: the handler only reads
// them. The signal's digits go into the last argument's tail.
char** g_restart_argv = nullptr;
char* g_signal_digits = nullptr;  // 3 digits and a NUL
int g_max_fd = 1024;
std::atomic<bool> g_restarting{false};

void WriteStderr(const char* s) {
  ssize_t n = static_cast<ssize_t>(std::strlen(s));
  while (n > 0) {
    const ssize_t w = write(2, s, static_cast<size_t>(n));
    if (w <= 0) return;
    s += w;
    n -= w;
  }
}

void OnFatalSignal(int sig) {
  if (!g_restarting.exchange(true)) {
    const int saved = errno;
    char digits[4] = {static_cast<char>('0' + (sig / 100) % 10),
                      static_cast<char>('0' + (sig / 10) % 10),
                      static_cast<char>('0' + sig % 10), '\0'};
    std::memcpy(g_signal_digits, digits, sizeof(digits));
    WriteStderr("gradsync-worker: fatal signal ");
    WriteStderr(digits);
    WriteStderr(" (a job's model may have corrupted memory); restarting\n");
    // close_range (Linux 5.11) in one call; else one descriptor at a time.
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
      for (int fd = 3; fd < g_max_fd; ++fd) {
        const int flags = fcntl(fd, F_GETFD);
        if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
      }
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    execv("/proc/self/exe", g_restart_argv);
    errno = saved;
    WriteStderr("gradsync-worker: the restart failed; exiting\n");
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void RestartOnFatalSignals(const std::vector<std::string>& argv) {
  if (argv.empty() || g_restart_argv != nullptr) return;
  g_restart_argv = new char*[argv.size() + 2];
  for (size_t i = 0; i < argv.size(); ++i) g_restart_argv[i] = strdup(argv[i].c_str());
  const std::string flag = absl::StrCat(kRestartedAfterSignalFlag, "000");
  g_restart_argv[argv.size()] = strdup(flag.c_str());
  g_restart_argv[argv.size() + 1] = nullptr;
  g_signal_digits = g_restart_argv[argv.size()] + std::strlen(kRestartedAfterSignalFlag);
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    g_max_fd = static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 20));
  }
  struct sigaction sa {};
  sa.sa_handler = &OnFatalSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  for (int sig : kFatalSignals) sigaction(sig, &sa, nullptr);
}

}  // namespace gradsync
