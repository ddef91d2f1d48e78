// Writing the compile's text outputs (OUT/main.cpp, the dumps): one place that says what failed.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

namespace megac {

/// Writes what `print` prints to `path` (a file that fails half-way is removed again). On
/// failure says so, naming the path and why, and returns false.
bool writeTextFile(llvm::StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> print);

} // namespace megac
