// Reading the compile's input (the spec) and the JSON files and outputs megac reads, writing its
// text outputs (OUT/main.cpp, the dumps), and naming files in folders: one place that says what
// failed.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace megac {

/// The contents of `path`, of at most `maxBytes` (read in pieces: a device or a pipe that never
/// ends is refused at the limit, not read into memory). Errors say "cannot read <what> PATH: why".
llvm::Expected<std::string> readTextFile(llvm::StringRef path, uint64_t maxBytes, llvm::StringRef what);

/// The JSON object held in `path` (at most `maxBytes`); errors name `what`: "WHAT: not JSON
/// (why)", "WHAT: holds no JSON object".
llvm::Expected<llvm::json::Object> readJsonObject(llvm::StringRef path, uint64_t maxBytes, const llvm::Twine &what);

/// DIR/A/B/C, with the platform's separator.
std::string joinPath(llvm::StringRef dir, const llvm::Twine &a, const llvm::Twine &b = "", const llvm::Twine &c = "");

/// Writes what `print` prints to `path` (a file that fails half-way is removed again). On
/// failure says so, naming the path and why, and returns false.
bool writeTextFile(llvm::StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> print);

} // namespace megac
