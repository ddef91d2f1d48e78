#include "megart/param_init.h"

#include "megart/param_layout.h"

#include <algorithm>
#include <cmath>

namespace megart {

namespace {
constexpr double kTwoPi = 6.283185307179586476925286766559;
} // namespace

uint64_t fnv1a64(const char *text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char *p = reinterpret_cast<const unsigned char *>(text); *p; ++p) {
    h ^= *p;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t init_tensor_key(uint64_t seed, const char *name) {
  return splitmix64_mix(splitmix64_mix(seed) ^ fnv1a64(name));
}

double init_standard_normal(uint64_t key, uint64_t element) {
  const uint64_t j = 2 * element + 1;
  const uint64_t r1 = splitmix64_mix(key + j * kSplitmixGamma);
  const uint64_t r2 = splitmix64_mix(key + (j + 1) * kSplitmixGamma);
  // +1 keeps u1 away from 0, where the log would be infinite.
  const double u1 = static_cast<double>((r1 >> 11) + 1) * 0x1.0p-53;
  const double u2 = static_cast<double>((r2 >> 11) + 1) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

double init_symmetric_uniform(uint64_t key, uint64_t element) {
  const uint64_t r = splitmix64_mix(key + (2 * element + 1) * kSplitmixGamma);
  return 2.0 * (static_cast<double>(r >> 11) * 0x1.0p-53) - 1.0;
}

void init_param_block(const ParamDesc &desc, uint64_t seed, float *block) {
  const int64_t n = block_numel(desc);
  const bool random = desc.init == ParamInit::Normal || desc.init == ParamInit::KaimingUniform;
  if (!random || desc.padded) // padding is 0 whatever the init
    std::fill(block, block + n, 0.0f);
  if (desc.init == ParamInit::Zeros)
    return;
  if (desc.init == ParamInit::Ones) {
    for_each_block_row(desc, [&](int64_t, int64_t b, int64_t c) {
      std::fill(block + b, block + b + c, 1.0f);
    });
    return;
  }
  const uint64_t key = init_tensor_key(seed, desc.name);
  const double stddev = desc.init_std;
  const bool uniform = desc.init == ParamInit::KaimingUniform;
  const double bound = 1.0 / std::sqrt(static_cast<double>(desc.full_shape[desc.rank - 1]));
  // Collect the rows first so OpenMP can split them; each element's value is independent.
  struct Row { int64_t full, block, count; };
  std::vector<Row> rows;
  rows.reserve(static_cast<size_t>(n / desc.shape[desc.rank - 1]));
  for_each_block_row(desc, [&](int64_t f, int64_t b, int64_t c) { rows.push_back({f, b, c}); });
  const int64_t num_rows = static_cast<int64_t>(rows.size());
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t r = 0; r < num_rows; ++r) {
    const Row row = rows[r];
    for (int64_t i = 0; i < row.count; ++i) {
      const uint64_t e = static_cast<uint64_t>(row.full + i);
      block[row.block + i] = static_cast<float>(uniform ? bound * init_symmetric_uniform(key, e)
                                                        : stddev * init_standard_normal(key, e));
    }
  }
}

} // namespace megart
