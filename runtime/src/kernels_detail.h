// Helpers shared by the kernel sources (not part of the public contract).
#pragma once

#include "megart/half.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

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

// n elements converted from S to D storage (widened, then rounded once); a copy when the types
// are the same.
template <typename D, typename S> void convert(D* dst, const S* src, int64_t n) {
  if constexpr (std::is_same_v<D, S>) {
    if (n > 0)
      std::memcpy(dst, src, sizeof(D) * static_cast<size_t>(n));
  } else {
    for (int64_t i = 0; i < n; ++i)
      dst[i] = from_float<D>(to_float(src[i]));
  }
}

// Where a kernel accumulates an output row in fp32: the row itself when the output is fp32,
// else `scratch`, stored with store_row once the row is complete (one rounding per element).
template <typename T> float* accumulator(T* row, float* scratch) {
  if constexpr (std::is_same_v<T, float>)
    return row;
  else
    return scratch;
}
template <typename T> void store_row(T* row, const float* acc, int64_t n) {
  if constexpr (!std::is_same_v<T, float>)
    convert(row, acc, n);
}

// A row's softmax statistics: its largest value and the sum of exp(value - max) in double, over
// the first `n` columns (a loss's valid vocabulary, a router's experts). log(sum) + max is the
// row's logsumexp.
struct RowSoftmax {
  float max;
  double sum;
};

template <typename A> RowSoftmax row_softmax(const A *row, int64_t n) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    const float v = to_float(row[j]);
    mx = v > mx ? v : mx;
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j)
    sum += std::exp(static_cast<double>(to_float(row[j])) - mx);
  return {mx, sum};
}

} // namespace megart::cpu::detail
