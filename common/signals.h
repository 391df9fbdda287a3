// Waiting for SIGINT / SIGTERM without async-signal handlers.
#ifndef GRADSYNC_COMMON_SIGNALS_H_
#define GRADSYNC_COMMON_SIGNALS_H_

#include <signal.h>

namespace gradsync {

// {SIGINT, SIGTERM}: what a launcher blocks through fork and exec so that a
// daemon it starts never has them unblocked.
sigset_t TerminationSignals();

// Blocks SIGINT, SIGTERM (and ignores SIGPIPE) in the calling thread; call
// first in main so that every thread started afterwards inherits the mask.
// Threads started before (by libraries as they load) get a handler that
// passes the signal on to the thread in WaitForTerminationSignal, so it
// neither ends the process by its default action nor is lost.
void BlockTerminationSignals();

// BlockTerminationSignals in the form of a .preinit_array entry, which the
// dynamic loader runs before any shared library's initializer, so that no
// thread of the process ever has the signals unblocked and a SIGTERM at
// any moment, even while libraries load, is a clean stop. A daemon's
// main.cc registers it:
//   __attribute__((section(".preinit_array"), used)) static void (*const
//       kBlockSignalsAtLoad)(int, char**, char**) = &BlockTerminationSignalsAtLoad;
void BlockTerminationSignalsAtLoad(int argc, char** argv, char** envp);

// Waits for SIGINT or SIGTERM and returns its number (one that came before
// the call too). One thread at a time, started after BlockTerminationSignals.
int WaitForTerminationSignal();

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SIGNALS_H_
