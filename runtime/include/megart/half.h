// The 16-bit storage types of a program compiled with --bf16 / --fp16 (activations and their
// gradients; parameters, their gradients and the optimizer stay fp32). Kernels take them as
// typed pointers, widen every element they read to fp32, compute in fp32 and round once when
// they store: storage is 16-bit, arithmetic is not (the CPU's side of the autocast model).
#pragma once

#include "megart/bf16.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace megart {

struct bf16_t {
  uint16_t bits;
};
struct fp16_t {
  uint16_t bits;
};
static_assert(sizeof(bf16_t) == 2 && sizeof(fp16_t) == 2, "16-bit storage types must be 2 bytes");

// fp16 from fp32, round to nearest even (what __float2half_rn gives): 10 fraction bits; normal
// from 2^-14 to 65504, subnormal (multiples of 2^-24) below, +-inf beyond 65504 after rounding;
// inf stays inf, NaN stays a quiet NaN with its sign.
inline uint16_t float_to_fp16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t mag = u & 0x7FFFFFFFu;
  if (mag >= 0x7F800000u) // inf or NaN
    return static_cast<uint16_t>(sign | 0x7C00u | ((mag & 0x007FFFFFu) ? 0x0200u : 0u));
  if (mag < 0x38800000u) { // |x| < 2^-14: a subnormal (or zero) of fp16, exact scaling by 2^24
    float scaled;
    const uint32_t m = mag;
    std::memcpy(&scaled, &m, sizeof scaled);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled * 0x1p24f)));
  }
  // Normal: rebias the exponent (127 -> 15), round the 13 dropped fraction bits to nearest even;
  // a carry moves into the exponent, up to inf (0x7C00) past 65504.
  uint32_t h = ((mag - 0x38000000u) >> 13);
  const uint32_t rest = mag & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h;
  if (h >= 0x7C00u)
    h = 0x7C00u;
  return static_cast<uint16_t>(sign | h);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu, fraction = h & 0x3FFu;
  uint32_t u;
  if (exponent == 0x1Fu) {
    u = sign | 0x7F800000u | (fraction << 13);
  } else if (exponent == 0) { // zero or subnormal: fraction x 2^-24, exact in fp32
    const float v = static_cast<float>(fraction) * 0x1p-24f;
    std::memcpy(&u, &v, sizeof u);
    u |= sign;
  } else {
    u = sign | ((exponent + 112u) << 23) | (fraction << 13);
  }
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// Reads of any storage type as fp32, and rounding stores into one.
inline float to_float(float x) { return x; }
inline float to_float(bf16_t x) { return bf16_to_float(x.bits); }
inline float to_float(fp16_t x) { return fp16_to_float(x.bits); }

template <typename T> T from_float(float x);
template <> inline float from_float<float>(float x) { return x; }
template <> inline bf16_t from_float<bf16_t>(float x) { return bf16_t{float_to_bf16(x)}; }
template <> inline fp16_t from_float<fp16_t>(float x) { return fp16_t{float_to_fp16(x)}; }

} // namespace megart
