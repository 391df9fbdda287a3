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

// The flag a restart after a fatal signal adds to the command line, with
// the signal's number (--restarted_after_signal=11), so that the new run
// can say in its log why it started; main strips it before installing.
inline constexpr char kRestartedAfterSignalFlag[] = "--restarted_after_signal=";

// Makes a fatal signal of the daemon (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
// SIGABRT: what a user's model that corrupts memory or trips an assertion
// in libtorch raises on the job's thread) a restart instead of the end of
// the daemon: a handler writes one line to stderr, marks every descriptor
// above 2 close-on-exec, unblocks the signal and execv's /proc/self/exe
// with `argv` plus kRestartedAfterSignalFlag and the signal's number. Only
// async-signal-safe calls run in the handler; the command line is laid out
// here, beforehand. The signals are the daemon's own; a second one while a
// restart is under way, or an execv that fails, ends the process by the
// signal's default action, as without the handler. A crash in start-up
// would loop, so install this once the daemon is serving.
void RestartOnFatalSignals(const std::vector<std::string>& argv);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_RESTART_H_
