// Waiting for SIGINT / SIGTERM without async-signal handlers.
#ifndef GRADSYNC_COMMON_SIGNALS_H_
#define GRADSYNC_COMMON_SIGNALS_H_

namespace gradsync {

// Blocks SIGINT, SIGTERM (and SIGPIPE) in the calling thread; call first in
// main so that every thread started afterwards inherits the mask.
void BlockTerminationSignals();

// Waits for SIGINT or SIGTERM and returns its number.
int WaitForTerminationSignal();

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SIGNALS_H_
