// train_main with its output streams as arguments, so tests can run a whole training program
// in-process and read what it printed. megart::train_main (program.h) calls it with
// std::cout / std::cerr.
#pragma once

#include "megart/process_grid.h"
#include "megart/program.h"

#include <ostream>

namespace megart {

// Exit codes: 0 done (or --help, --rank-layout), 1 command-line parse error, 2 anything the
// runtime rejects (message "error: ..." on `err`; all checks run on every rank before training
// starts or a file is written). Starts MPI only under mpirun (ProcessGrid::launch). A failure
// after training started on a grid of several ranks prints "error (rank R of N): ..." and
// aborts the MPI job, so no rank waits forever for the failed one.
int train_main(int argc, const char *const *argv, const ProgramDesc &program, std::ostream &out,
               std::ostream &err);

// The same on a grid the caller built (ProcessGrid::single, or ProcessGrid::on a communicator),
// so tests can run several grids in one MPI job. The grid's shape must be the program's plan.
// Only the grid's global rank 0 prints to `out` and writes metrics and checkpoints.
int train_on_grid(int argc, const char *const *argv, const ProgramDesc &program,
                  ProcessGrid &grid, std::ostream &out, std::ostream &err);

} // namespace megart
