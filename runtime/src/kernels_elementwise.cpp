// Broadcast add/mul, leading-axis sum and scaling. out may alias a / x exactly (in place).
#include "kernels_detail.h"
#include "megart/kernels.h"

#include <algorithm>
#include <vector>

namespace megart::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 14;

// out[i, j] = op(a[i, j], b[j]). Rows in parallel when there are several; a single row is
// split into column chunks instead so it still uses every thread.
template <typename Op>
void broadcast(float* out, const float* a, const float* b, int64_t outer, int64_t inner, Op op) {
  if (outer == 1) {
#pragma omp parallel for schedule(static) if (inner > kParallelMin)
    for (int64_t j = 0; j < inner; ++j)
      out[j] = op(a[j], b[j]);
    return;
  }
#pragma omp parallel for schedule(static) if (outer * inner > kParallelMin)
  for (int64_t i = 0; i < outer; ++i) {
    const float* ar = a + i * inner;
    float* orow = out + i * inner;
    for (int64_t j = 0; j < inner; ++j)
      orow[j] = op(ar[j], b[j]);
  }
}

} // namespace

void add(float* out, const float* a, const float* b, int64_t outer, int64_t inner) {
  broadcast(out, a, b, outer, inner, [](float x, float y) { return x + y; });
}

void mul(float* out, const float* a, const float* b, int64_t outer, int64_t inner) {
  broadcast(out, a, b, outer, inner, [](float x, float y) { return x * y; });
}

void reduce_sum_leading(float* out, const float* x, int64_t outer, int64_t inner) {
  // Fixed row blocks summed into double partials, then the partials in block order: the same
  // additions happen in the same order for any thread count.
  const int64_t blocks = detail::row_blocks(outer);
  std::vector<double> partial(static_cast<size_t>(blocks * inner), 0.0);
#pragma omp parallel for schedule(static) if (outer * inner > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    double* p = partial.data() + blk * inner;
    const int64_t r1 = std::min(outer, (blk + 1) * detail::kRowBlock);
    for (int64_t r = blk * detail::kRowBlock; r < r1; ++r) {
      const float* xr = x + r * inner;
      for (int64_t j = 0; j < inner; ++j)
        p[j] += static_cast<double>(xr[j]);
    }
  }
  detail::sum_row_blocks(out, partial.data(), blocks, inner);
}

void scale(float* out, const float* x, float s, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] * s;
}

} // namespace megart::cpu
