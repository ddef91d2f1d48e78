#include "megart/crash_point.h"

#include <csignal>
#include <cstdlib>
#include <cstring>

namespace megart {

void crash_point(const char *name) {
  const char *at = std::getenv("MEGART_CRASH_AT");
  if (!at || std::strcmp(at, name) != 0)
    return;
  // MEGART_CRASH_SIGNAL=TERM or INT sends that stop signal instead of dying as by SIGKILL.
  const char *sig = std::getenv("MEGART_CRASH_SIGNAL");
  std::raise(sig && std::strcmp(sig, "TERM") == 0 ? SIGTERM : sig && std::strcmp(sig, "INT") == 0 ? SIGINT : SIGKILL);
}

} // namespace megart
