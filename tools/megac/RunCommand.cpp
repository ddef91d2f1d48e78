#include "RunCommand.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Program.h"

using namespace llvm;

Error megac::runCommand(ArrayRef<std::string> args, const Twine &what, std::optional<StringRef> stdoutTo) {
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::optional<StringRef> redirects[] = {std::nullopt, stdoutTo, std::nullopt}; // nullopt: inherited
  std::string message;
  int rc = sys::ExecuteAndWait(args[0], argRefs, std::nullopt, redirects, 0, 0, &message);
  if (rc == 0)
    return Error::success();
  std::string cmd;
  for (StringRef a : argRefs)
    cmd += a.str() + " ";
  return createStringError(inconvertibleErrorCode(), what + " failed (" +
                                                         (message.empty() ? "exit " + std::to_string(rc) : message) +
                                                         "); the command was:\n  " + cmd);
}
