// train_main with its output streams as arguments, so tests can run a whole training program
// in-process and read what it printed. megart::train_main (program.h) calls it with
// std::cout / std::cerr.
#pragma once

#include "megart/program.h"

#include <ostream>

namespace megart {

// Exit codes: 0 done (or --help), 1 command-line parse error, 2 anything the runtime rejects
// (message "error: ..." on `err`; all checks run before training starts or a file is written).
int train_main(int argc, const char *const *argv, const ProgramDesc &program, std::ostream &out,
               std::ostream &err);

} // namespace megart
