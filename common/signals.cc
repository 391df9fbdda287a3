#include "common/signals.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>

namespace gradsync {
namespace {

// The thread in WaitForTerminationSignal, once there is one; a signal that
// comes before is kept in `early`.
pthread_t waiter;
std::atomic<bool> have_waiter{false};
volatile sig_atomic_t early = 0;

// Threads that a library starts before main blocks the signals (OpenBLAS
// starts its pool when it is loaded) have them unblocked, and the kernel
// may deliver SIGTERM to one of them, whose default action ended the whole
// process (exit 143) instead of the clean stop. This handler runs in such a
// thread and hands the signal to the waiting thread, which blocks it
// (pthread_kill is async-signal-safe), so its sigwait returns it.
void ForwardToWaiter(int sig) {
  if (have_waiter.load(std::memory_order_acquire)) {
    pthread_kill(waiter, sig);
  } else {
    early = sig;
  }
}

}  // namespace

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  struct sigaction forward = {};
  forward.sa_handler = ForwardToWaiter;
  sigfillset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  sigaction(SIGINT, &forward, nullptr);
  sigaction(SIGTERM, &forward, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

void BlockTerminationSignalsAtLoad(int, char**, char**) { BlockTerminationSignals(); }

int WaitForTerminationSignal() {
  waiter = pthread_self();
  have_waiter.store(true, std::memory_order_release);
  if (early != 0) return early;
  sigset_t set = TerminationSignals();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

}  // namespace gradsync
