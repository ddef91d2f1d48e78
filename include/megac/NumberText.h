// A double as the shortest text that reads back as the same number ("1e-05", "10000", "0.7",
// "nan"): specs, messages and command lines say exactly what was given. The compiler's copy of
// megart/number_text.h: lib/ does not depend on the runtime.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace megac {

inline std::string shortestExactText(double x) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x)
      break;
  }
  return buf;
}

} // namespace megac
