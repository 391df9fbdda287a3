// A worker daemon that cannot stop its own job thread (a user's model whose
// forward never returns, issue 51) gets back to a clean state by replacing
// itself with a fresh run of the same program: same arguments, same PID, so
// it registers again under the same id and whatever started it (a
// container, Slurm, `gradsync local`) still holds the right process.
#ifndef GRADSYNC_WORKER_RESTART_H_
#define GRADSYNC_WORKER_RESTART_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gradsync {

// Marks every open descriptor above 2 close-on-exec (sockets and files the
// new image must be able to open or bind again; marking them disturbs no
// thread still using them), then execv("/proc/self/exe", argv). Returns
// only if that failed, with the error. Blocked signals stay blocked, as
// execv keeps the mask (the daemon blocks them before any thread starts).
absl::Status RestartSelf(const std::vector<std::string>& argv);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_RESTART_H_
