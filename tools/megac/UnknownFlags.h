// Unknown flags, found before LLVM's parser sees them: it reads an unknown flag that starts with
// a one-letter flag's letter as a group of one-letter flags, so --hidden-size would run -h
// (print the help and exit 0) and --ox would complain about -o.
#pragma once

#include "llvm/ADT/ArrayRef.h"

#include <optional>
#include <string>

namespace megac {

/// The error for the first argument that looks like a flag (-x, --name, --name=value) but is
/// none of the chosen subcommand's, naming it; with a note when it is a spec key (--hidden-size).
/// The values of flags that take one are skipped, so --global-batch-size -4 is left to the flag.
std::optional<std::string> findUnknownFlag(llvm::ArrayRef<const char *> argv);

} // namespace megac
