#include "worker/restart.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

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

}  // namespace gradsync
