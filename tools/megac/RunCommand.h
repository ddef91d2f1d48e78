// Running another program from megac (the host compiler, nvcc, megac itself, Python, OUT/train)
// and saying, when it fails, which command and how it ended.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <csignal>
#include <optional>
#include <string>

namespace megac {

/// While alive, SIGTERM and SIGINT stop the command runCommand is running (and any it would run
/// next) instead of killing megac outright, so that what was made since can be removed (objects
/// made after the guard are destroyed before it); its destructor then ends megac by that signal,
/// as it would have ended.
class StopSignals {
public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals &) = delete;
  StopSignals &operator=(const StopSignals &) = delete;
  int received() const; // the signal, or 0

private:
  struct sigaction oldTerm {}, oldInt {};
};

/// Runs `args` (args[0] a full path) and waits; its standard output goes to the file `stdoutTo`
/// when given. Fails with "<what> failed (exit N); the command was: ...".
llvm::Error runCommand(llvm::ArrayRef<std::string> args, const llvm::Twine &what,
                       std::optional<llvm::StringRef> stdoutTo = std::nullopt);

} // namespace megac
