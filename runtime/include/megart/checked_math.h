// Sizes from users (flags, specs, files) are multiplied only through these: an overflow is an
// empty result the caller turns into an error naming the inputs, never a wrapped value.
#pragma once

#include <cstdint>
#include <optional>

namespace megart {

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

} // namespace megart
