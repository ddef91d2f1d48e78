// bf16 values as their 16 bits (the upper half of an fp32), for the conversions the runtime
// does on the host: the CPU GEMM emulation and gradients reduced in bf16 (--grad-reduce-in-bf16).
#pragma once

#include <cstdint>
#include <cstring>

namespace megart {

// Rounds to nearest, ties to even, as the GPU's __float2bfloat16_rn does: fp32's exponent range
// (subnormals included), 7 fraction bits; a value past the largest bf16 becomes inf, inf stays
// inf, NaN stays a quiet NaN with its sign.
inline uint16_t float_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7F800000u) == 0x7F800000u) // inf or NaN: no rounding (it would carry into NaN)
    return static_cast<uint16_t>((u >> 16) | ((u & 0x007FFFFFu) ? 0x0040u : 0u));
  // Half an ulp, minus one unless the last kept bit is odd; a carry bumps the exponent.
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

} // namespace megart
