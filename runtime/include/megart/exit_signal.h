// --exit-signal-handler: SIGTERM (what Slurm sends before a job's time limit) only raises a
// flag; the training loop looks at it after each iteration, saves and exits cleanly.
#pragma once

namespace megart {

// Installs the SIGTERM handler (idempotent) and clears the flag.
void install_exit_signal_handler();
// Whether SIGTERM arrived since install_exit_signal_handler.
bool exit_signal_received();

} // namespace megart
