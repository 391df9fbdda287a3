// Waiting for SIGINT / SIGTERM without async-signal handlers.
#ifndef GRADSYNC_COMMON_SIGNALS_H_
#define GRADSYNC_COMMON_SIGNALS_H_

namespace gradsync {

// Blocks SIGINT, SIGTERM (and ignores SIGPIPE) in the calling thread; call
// first in main so that every thread started afterwards inherits the mask.
// Threads started before (by libraries as they load) get a handler that
// passes the signal on to the thread in WaitForTerminationSignal, so it
// neither ends the process by its default action nor is lost.
void BlockTerminationSignals();

// Waits for SIGINT or SIGTERM and returns its number (one that came before
// the call too). One thread at a time, started after BlockTerminationSignals.
int WaitForTerminationSignal();

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SIGNALS_H_
