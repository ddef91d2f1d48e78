#include "megart/exit_signal.h"

#include <csignal>
#include <cstdlib>
#include <initializer_list>

namespace megart {

namespace {
volatile std::sig_atomic_t received = 0;
volatile std::sig_atomic_t saving = 0;   // a SavingCheckpoint guard is alive
volatile std::sig_atomic_t waiting = 0;  // WaitingForPeer guards alive
volatile std::sig_atomic_t deferred = 0; // the stop signal that arrived during a save or a wait
extern "C" void on_sigterm(int) { received = 1; }

// Async-signal-safe: ends the process by `sig` as the default action would have.
void end_by(int sig) {
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

extern "C" void on_stop_signal(int sig) {
  if (saving || waiting)
    deferred = sig;
  else
    end_by(sig);
}
} // namespace

void install_exit_signal_handler() {
  received = 0;
  struct sigaction action = {};
  action.sa_handler = on_sigterm;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART; // a read or write in progress continues
  sigaction(SIGTERM, &action, nullptr);
}

bool exit_signal_received() { return received != 0; }

void install_stop_signal_handlers() {
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT}) {
    struct sigaction current = {};
    sigaction(sig, nullptr, &current);
    if (current.sa_handler == SIG_DFL) // not --exit-signal-handler's, nor an ignored one
      sigaction(sig, &action, nullptr);
  }
}

SavingCheckpoint::SavingCheckpoint() { saving = 1; }

SavingCheckpoint::~SavingCheckpoint() {
  saving = 0;
  if (const int sig = deferred)
    end_by(sig);
}

WaitingForPeer::WaitingForPeer() { ++waiting; }

WaitingForPeer::~WaitingForPeer() {
  --waiting;
  if (const int sig = held_stop_signal())
    end_by(sig);
}

int held_stop_signal() { return saving ? 0 : static_cast<int>(deferred); }

void end_by_held_stop_signal() {
  end_by(deferred);
  std::abort(); // not reached: the default action of a stop signal ends the process
}

const char *stop_signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

} // namespace megart
