#include "megart/exit_signal.h"

#include <csignal>

namespace megart {

namespace {
volatile std::sig_atomic_t received = 0;
extern "C" void on_sigterm(int) { received = 1; }
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

} // namespace megart
