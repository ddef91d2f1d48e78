// Stop signals and checkpoints.
// --exit-signal-handler: SIGTERM (what Slurm sends before a job's time limit) only raises a
// flag; the training loop looks at it after each iteration, saves and exits cleanly.
// Without it, SIGTERM and SIGINT end the run at once as usual, except during a save: there they
// wait for the save to finish or fail (its staging folder removed either way), then end the
// run, so no half-written folder is left for the next start to find; and while a rank waits for
// a peer's message they are held for the waiting loop, which says what it waited for before the
// run ends (mpirun stops the other ranks this way when one exits: the line names the lost peer).
#pragma once

namespace megart {

// Installs the SIGTERM handler (idempotent) and clears the flag.
void install_exit_signal_handler();
// Whether SIGTERM arrived since install_exit_signal_handler.
bool exit_signal_received();

// Installs the handlers that hold SIGTERM (unless --exit-signal-handler took it) and SIGINT
// back while a SavingCheckpoint or WaitingForPeer guard is alive.
void install_stop_signal_handlers();

// While alive, a stop signal waits; it takes effect when the guard goes.
class SavingCheckpoint {
public:
  SavingCheckpoint();
  ~SavingCheckpoint();
  SavingCheckpoint(const SavingCheckpoint &) = delete;
  SavingCheckpoint &operator=(const SavingCheckpoint &) = delete;
};

// While alive, a stop signal outside a save is held until the waiter reports it
// (held_stop_signal, end_by_held_stop_signal) or the guard goes.
class WaitingForPeer {
public:
  WaitingForPeer();
  ~WaitingForPeer();
  WaitingForPeer(const WaitingForPeer &) = delete;
  WaitingForPeer &operator=(const WaitingForPeer &) = delete;
};

// The stop signal held by a WaitingForPeer guard outside a save, 0 when none.
int held_stop_signal();
// Ends the process by the held signal, as its default action would have.
[[noreturn]] void end_by_held_stop_signal();
// "SIGTERM", "SIGINT".
const char *stop_signal_name(int sig);

} // namespace megart
