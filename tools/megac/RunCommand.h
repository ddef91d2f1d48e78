// Running another program from megac (the host compiler, nvcc, megac itself, Python, OUT/train)
// and saying, when it fails, which command and how it ended.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace megac {

/// Runs `args` (args[0] a full path) and waits; its standard output goes to the file `stdoutTo`
/// when given. Fails with "<what> failed (exit N); the command was: ...".
llvm::Error runCommand(llvm::ArrayRef<std::string> args, const llvm::Twine &what,
                       std::optional<llvm::StringRef> stdoutTo = std::nullopt);

} // namespace megac
