#include "RunCommand.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Program.h"

#include <csignal>
#include <sys/types.h>

using namespace llvm;

namespace {

// The command running now, and the stop signal received while a StopSignals guard is alive.
volatile sig_atomic_t runningChild = 0;
volatile sig_atomic_t stopSignal = 0;

void onStopSignal(int sig) {
  stopSignal = sig;
  if (runningChild > 0)
    ::kill(static_cast<pid_t>(runningChild), SIGTERM); // async-signal-safe; the waiter sees it end
}

} // namespace

megac::StopSignals::StopSignals() {
  struct sigaction action {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, &oldTerm);
  sigaction(SIGINT, &action, &oldInt);
}

megac::StopSignals::~StopSignals() {
  sigaction(SIGTERM, &oldTerm, nullptr);
  sigaction(SIGINT, &oldInt, nullptr);
  if (const int sig = stopSignal) { // end as the signal would have, now that nothing is left behind
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

int megac::StopSignals::received() const { return stopSignal; }

Error megac::runCommand(ArrayRef<std::string> args, const Twine &what, std::optional<StringRef> stdoutTo) {
  auto fail = [&](const std::string &how) {
    std::string cmd;
    for (const std::string &a : args)
      cmd += a + " ";
    return createStringError(inconvertibleErrorCode(), what + " failed (" + how + "); the command was:\n  " + cmd);
  };
  if (stopSignal)
    return fail("stopped by signal " + std::to_string(stopSignal) + " before it started");
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::optional<StringRef> redirects[] = {std::nullopt, stdoutTo, std::nullopt}; // nullopt: inherited
  std::string message;
  bool failed = false;
  sys::ProcessInfo child = sys::ExecuteNoWait(args[0], argRefs, std::nullopt, redirects, 0, &message, &failed);
  if (failed)
    return fail(message);
  runningChild = child.Pid;
  if (stopSignal) // arrived between the start and the line above
    ::kill(child.Pid, SIGTERM);
  sys::ProcessInfo done = sys::Wait(child, std::nullopt, &message);
  runningChild = 0;
  if (stopSignal)
    return fail("stopped by signal " + std::to_string(stopSignal));
  if (done.ReturnCode == 0)
    return Error::success();
  return fail(message.empty() ? "exit " + std::to_string(done.ReturnCode) : message);
}
