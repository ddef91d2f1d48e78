// Broadcast add/mul, leading-axis sum and scaling. out may alias a / x exactly (in place).
// Templates over the storage types (kernels.h): loads widen, stores round once.
#include "kernels_detail.h"
#include "megart/kernels.h"

#include <algorithm>
#include <vector>

namespace megart::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 14;

// out[i, j] = op(a[i, j], b[j]). Rows in parallel when there are several; a single row is
// split into column chunks instead so it still uses every thread.
template <typename O, typename L, typename R, typename Op>
void broadcast(O* out, const L* a, const R* b, int64_t outer, int64_t inner, Op op) {
  if (outer == 1) {
#pragma omp parallel for schedule(static) if (inner > kParallelMin)
    for (int64_t j = 0; j < inner; ++j)
      out[j] = from_float<O>(op(to_float(a[j]), to_float(b[j])));
    return;
  }
#pragma omp parallel for schedule(static) if (outer * inner > kParallelMin)
  for (int64_t i = 0; i < outer; ++i) {
    const L* ar = a + i * inner;
    O* orow = out + i * inner;
    for (int64_t j = 0; j < inner; ++j)
      orow[j] = from_float<O>(op(to_float(ar[j]), to_float(b[j])));
  }
}

} // namespace

template <typename O, typename L, typename R>
void add(O* out, const L* a, const R* b, int64_t outer, int64_t inner) {
  broadcast(out, a, b, outer, inner, [](float x, float y) { return x + y; });
}

template <typename O, typename L, typename R>
void mul(O* out, const L* a, const R* b, int64_t outer, int64_t inner) {
  broadcast(out, a, b, outer, inner, [](float x, float y) { return x * y; });
}

void add(float* out, const float* a, const float* b, int64_t outer, int64_t inner) {
  add<float, float, float>(out, a, b, outer, inner);
}

void mul(float* out, const float* a, const float* b, int64_t outer, int64_t inner) {
  mul<float, float, float>(out, a, b, outer, inner);
}

template <typename A> void reduce_sum_leading(float* out, const A* x, int64_t outer, int64_t inner) {
  // Fixed row blocks summed into double partials, then the partials in block order: the same
  // additions happen in the same order for any thread count.
  const int64_t blocks = detail::row_blocks(outer);
  std::vector<double> partial(static_cast<size_t>(blocks * inner), 0.0);
#pragma omp parallel for schedule(static) if (outer * inner > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    double* p = partial.data() + blk * inner;
    const int64_t r1 = std::min(outer, (blk + 1) * detail::kRowBlock);
    for (int64_t r = blk * detail::kRowBlock; r < r1; ++r) {
      const A* xr = x + r * inner;
      for (int64_t j = 0; j < inner; ++j)
        p[j] += static_cast<double>(to_float(xr[j]));
    }
  }
  detail::sum_row_blocks(out, partial.data(), blocks, inner);
}

void reduce_sum_leading(float* out, const float* x, int64_t outer, int64_t inner) {
  reduce_sum_leading<float>(out, x, outer, inner);
}

template <typename A> void scale(A* out, const A* x, float s, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = from_float<A>(to_float(x[i]) * s);
}

void scale(float* out, const float* x, float s, int64_t n) { scale<float>(out, x, s, n); }

#define MEGART_ELEMENTWISE(A)                                                                      \
  template void add<A, A, A>(A*, const A*, const A*, int64_t, int64_t);                            \
  template void add<A, A, float>(A*, const A*, const float*, int64_t, int64_t);                    \
  template void mul<A, A, A>(A*, const A*, const A*, int64_t, int64_t);                            \
  template void mul<A, A, float>(A*, const A*, const float*, int64_t, int64_t);                    \
  template void reduce_sum_leading<A>(float*, const A*, int64_t, int64_t);                         \
  template void scale<A>(A*, const A*, float, int64_t);
MEGART_ELEMENTWISE(bf16_t)
MEGART_ELEMENTWISE(fp16_t)

} // namespace megart::cpu
