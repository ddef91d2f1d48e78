// Helpers shared by the kernel sources (not part of the public contract).
#pragma once

#include <cstdint>

namespace megart::cpu::detail {

// Reductions over rows are split into blocks of this many rows, fixed independently of the
// thread count, so a sum is formed in the same order however many threads run.
constexpr int64_t kRowBlock = 32;

inline int64_t row_blocks(int64_t rows) { return (rows + kRowBlock - 1) / kRowBlock; }

// out[j] = sum over b of partials[b * cols + j], added in block order (deterministic).
inline void sum_row_blocks(float* out, const double* partials, int64_t blocks, int64_t cols) {
#pragma omp parallel for schedule(static) if (blocks * cols > (1 << 15))
  for (int64_t j = 0; j < cols; ++j) {
    double s = 0.0;
    for (int64_t b = 0; b < blocks; ++b)
      s += partials[b * cols + j];
    out[j] = static_cast<float>(s);
  }
}

} // namespace megart::cpu::detail
