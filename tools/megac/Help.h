// megac's --help: the subcommands, and each one's flags with their short names and defaults.
// LLVM's own options (hundreds, registered by the libraries megac links) stay behind
// --help-hidden.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace megac {

/// When `args` ask for help (--help, -help, -h): prints it and returns true.
bool printHelpIfAsked(llvm::ArrayRef<const char *> args, llvm::StringRef overview);

} // namespace megac
