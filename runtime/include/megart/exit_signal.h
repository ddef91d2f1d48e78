// Stop signals and checkpoints.
// --exit-signal-handler: SIGTERM (what Slurm sends before a job's time limit) only raises a
// flag; the training loop looks at it after each iteration, saves and exits cleanly.
// Without it, SIGTERM and SIGINT end the run at once as usual, except during a save: there they
// wait for the save to finish or fail (its staging folder removed either way), then end the
// run, so no half-written folder is left for the next start to find.
#pragma once

namespace megart {

// Installs the SIGTERM handler (idempotent) and clears the flag.
void install_exit_signal_handler();
// Whether SIGTERM arrived since install_exit_signal_handler.
bool exit_signal_received();

// Installs the handlers that hold SIGTERM (unless --exit-signal-handler took it) and SIGINT
// back while a SavingCheckpoint guard is alive.
void install_stop_signal_handlers();

// While alive, a stop signal waits; it takes effect when the guard goes.
class SavingCheckpoint {
public:
  SavingCheckpoint();
  ~SavingCheckpoint();
  SavingCheckpoint(const SavingCheckpoint &) = delete;
  SavingCheckpoint &operator=(const SavingCheckpoint &) = delete;
};

} // namespace megart
