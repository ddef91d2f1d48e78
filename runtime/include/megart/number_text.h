// A double as the shortest text that reads back as the same number ("1e-05", "0.7", "nan"):
// messages and files say exactly what was read or given.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace megart {

inline std::string shortest_exact_text(double x) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x)
      break;
  }
  return buf;
}

} // namespace megart
