// Reading the compile's input (the spec) and writing its text outputs (OUT/main.cpp, the dumps):
// one place that says what failed.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace megac {

/// The contents of `path`, of at most `maxBytes` (read in pieces: a device or a pipe that never
/// ends is refused at the limit, not read into memory). Errors say "cannot read <what> PATH: why".
llvm::Expected<std::string> readTextFile(llvm::StringRef path, uint64_t maxBytes, llvm::StringRef what);

/// Writes what `print` prints to `path` (a file that fails half-way is removed again). On
/// failure says so, naming the path and why, and returns false.
bool writeTextFile(llvm::StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> print);

} // namespace megac
