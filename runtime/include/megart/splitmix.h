// SplitMix64's output function and its stream increment: the counter-based randomness behind
// parameter initialisation (megart/param_init.h), dropout masks (megart/dropout.h) and
// generation's draws, on the host and in CUDA kernels alike.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define MEGART_HOST_DEVICE __host__ __device__
#else
#define MEGART_HOST_DEVICE
#endif

namespace megart {

inline constexpr uint64_t kSplitmixGamma = 0x9E3779B97F4A7C15ull;

MEGART_HOST_DEVICE inline uint64_t splitmix64_mix(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

} // namespace megart
