#include "megart/crash_point.h"

#include <csignal>
#include <cstdlib>
#include <cstring>

namespace megart {

void crash_point(const char *name) {
  const char *at = std::getenv("MEGART_CRASH_AT");
  if (at && std::strcmp(at, name) == 0)
    std::raise(SIGKILL);
}

} // namespace megart
