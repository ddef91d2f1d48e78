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

void check_block(const DropoutBlock &b) {
  auto fail = [](const std::string &what) { throw Error("apply_dropout: " + what); };
  if (!(b.rate >= 0.0f && b.rate < 1.0f))
    fail("rate (" + std::to_string(b.rate) + ") must be in [0, 1)");
  if (b.rank < 1 || b.rank > kDropoutMaxRank)
    fail("rank " + std::to_string(b.rank) + " is outside [1, " + std::to_string(kDropoutMaxRank) + "]");
  for (int d = 0; d < b.rank; ++d) {
    if (b.shape[d] < 0 || b.offset[d] < 0)
      fail("dimension " + std::to_string(d) + " has a negative size or offset");
    if (d > 0 && b.offset[d] + b.shape[d] > b.extent[d])
      fail("dimension " + std::to_string(d) + ": the block [" + std::to_string(b.offset[d]) + ", " +
           std::to_string(b.offset[d] + b.shape[d]) + ") reaches past the extent " + std::to_string(b.extent[d]));
  }
}

} // namespace

template <typename A> void apply_dropout(A *y, const A *x, const DropoutBlock &b) {
  check_block(b);
  int64_t inner = 1; // elements per block row (the last dimension)
  int64_t rows = 1;
  for (int d = 0; d < b.rank; ++d)
    (d == b.rank - 1 ? inner : rows) *= b.shape[d];
  if (b.rate == 0.0f) {
    if (y != x)
      std::memmove(y, x, sizeof(A) * static_cast<size_t>(rows * inner));
    return;
  }
  const uint64_t threshold = dropout_keep_threshold(b.rate);
  const float keep_scale = dropout_keep_scale(b.rate);
#pragma omp parallel for schedule(static) if (rows * inner > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    // The row's global index: the block coordinates of row r (last dimension 0), mapped through
    // offset and extent, row-major.
    uint64_t global = 0;
    int64_t rest = r;
    uint64_t coords[kDropoutMaxRank] = {};
    for (int d = b.rank - 2; d >= 0; --d) {
      coords[d] = static_cast<uint64_t>(rest % b.shape[d] + b.offset[d]);
      rest /= b.shape[d];
    }
    for (int d = 0; d < b.rank - 1; ++d)
      global = (d == 0 ? 0 : global * static_cast<uint64_t>(b.extent[d])) + coords[d];
    const int last = b.rank - 1;
    global = (last == 0 ? 0 : global * static_cast<uint64_t>(b.extent[last])) + static_cast<uint64_t>(b.offset[last]);
    const A *xr = x + r * inner;
    A *yr = y + r * inner;
    for (int64_t i = 0; i < inner; ++i) {
      const bool keep = dropout_bits(b.key, global + static_cast<uint64_t>(i)) >= threshold;
      yr[i] = from_float<A>(keep ? to_float(xr[i]) * keep_scale : 0.0f);
    }
  }
}

template void apply_dropout<float>(float *, const float *, const DropoutBlock &);
template void apply_dropout<bf16_t>(bf16_t *, const bf16_t *, const DropoutBlock &);
template void apply_dropout<fp16_t>(fp16_t *, const fp16_t *, const DropoutBlock &);

} // namespace megart::cpu
