// Dropout with a counter-based mask: element e's fate is a pure function of (seed, e), so the
// backward (and any other device, any thread split) regenerates it without storing it.
#include "megart/error.h"
#include "megart/kernels.h"

#include <cstring>
#include <string>

namespace megart::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 14;

// Keep threshold on the 32 random bits: floor(rate * 2^32), computed in double.
uint64_t keep_threshold(const char* kernel, float rate) {
  if (!(rate >= 0.0f && rate < 1.0f))
    throw Error(std::string(kernel) + ": rate (" + std::to_string(rate) + ") must be in [0, 1)");
  return static_cast<uint64_t>(static_cast<double>(rate) * 4294967296.0);
}

inline uint32_t random_bits(uint64_t seed, uint64_t element) {
  // splitmix64 output function applied to a Weyl-style combination of seed and counter.
  uint64_t z = seed * 0xD1B54A32D192ED03ull + element;
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 32);
}

// y = x * mask / (1 - rate): forward and backward are the same map.
void apply_mask(const char* kernel, float* y, const float* x, int64_t n, float rate,
                uint64_t seed, uint64_t offset) {
  const uint64_t threshold = keep_threshold(kernel, rate);
  if (rate == 0.0f) {
    if (y != x)
      std::memmove(y, x, sizeof(float) * static_cast<size_t>(n));
    return;
  }
  const float keep_scale = 1.0f / (1.0f - rate);
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = random_bits(seed, offset + static_cast<uint64_t>(i)) >= threshold;
    y[i] = keep ? x[i] * keep_scale : 0.0f;
  }
}

} // namespace

uint32_t dropout_random_bits(uint64_t seed, uint64_t element) {
  return random_bits(seed, element);
}

void dropout_forward(float* y, const float* x, int64_t n, float rate, uint64_t seed,
                     uint64_t offset) {
  apply_mask("dropout_forward", y, x, n, rate, seed, offset);
}

void dropout_backward(float* dx, const float* dy, int64_t n, float rate, uint64_t seed,
                      uint64_t offset) {
  apply_mask("dropout_backward", dx, dy, n, rate, seed, offset);
}

} // namespace megart::cpu
