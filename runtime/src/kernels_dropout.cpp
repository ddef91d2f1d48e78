// Dropout on a rank's block of a site's global tensor (megart/dropout.h): an element's fate is a
// pure function of the site key and its global index, so the backward, a recomputed forward and
// every other plan regenerate the same mask without storing it.
#include "kernels_detail.h"
#include "megart/error.h"
#include "megart/kernels.h"

#include <cstring>
#include <string>

namespace megart::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 14;

} // namespace

template <typename A> void apply_dropout(A *y, const A *x, const DropoutBlock &b) {
  if (const std::string error = dropout_block_error(b); !error.empty())
    throw Error("apply_dropout: " + error);
  int64_t n = 1;
  for (int d = 0; d < b.rank; ++d)
    n *= b.shape[d];
  if (b.rate == 0.0f) {
    if (y != x)
      std::memmove(y, x, sizeof(A) * static_cast<size_t>(n));
    return;
  }
  const uint64_t threshold = dropout_keep_threshold(b.rate);
  const float keep_scale = dropout_keep_scale(b.rate);
  const int64_t inner = b.shape[b.rank - 1], rows = inner == 0 ? 0 : n / inner;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t row = dropout_global_index(b, r * inner); // the row's elements are consecutive
    for (int64_t i = 0; i < inner; ++i) {
      const bool keep = dropout_bits(b.key, row + static_cast<uint64_t>(i)) >= threshold;
      y[r * inner + i] = from_float<A>(keep ? to_float(x[r * inner + i]) * keep_scale : 0.0f);
    }
  }
}

template void apply_dropout<float>(float *, const float *, const DropoutBlock &);
template void apply_dropout<bf16_t>(bf16_t *, const bf16_t *, const DropoutBlock &);
template void apply_dropout<fp16_t>(fp16_t *, const fp16_t *, const DropoutBlock &);

} // namespace megart::cpu
