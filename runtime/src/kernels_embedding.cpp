// Token embedding lookup and its gradient. Templates over the activation storage type (out /
// dout); the table and its gradient are fp32.
#include "kernels_detail.h"
#include "megart/error.h"
#include "megart/kernels.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace megart::cpu {
namespace {

// Checked serially before any parallel region: an exception must not leave an OpenMP region.
void check_ids(const char* kernel, const int32_t* ids, int64_t tokens, int64_t vocab) {
  for (int64_t t = 0; t < tokens; ++t)
    if (ids[t] < 0 || ids[t] >= vocab)
      throw Error(std::string(kernel) + ": token id " + std::to_string(ids[t]) +
                  " at position " + std::to_string(t) + " is outside the vocabulary [0, " +
                  std::to_string(vocab) + ")");
}

} // namespace

template <typename A>
void embedding_forward(A* out, const float* table, const int32_t* ids, int64_t tokens,
                       int64_t vocab, int64_t dim) {
  check_ids("embedding_forward", ids, tokens, vocab);
#pragma omp parallel for schedule(static) if (tokens * dim > (1 << 15))
  for (int64_t t = 0; t < tokens; ++t)
    detail::convert(out + t * dim, table + static_cast<int64_t>(ids[t]) * dim, dim);
}

template <typename A>
void embedding_backward(float* dtable, const A* dout, const int32_t* ids, int64_t tokens,
                        int64_t vocab, int64_t dim) {
  check_ids("embedding_backward", ids, tokens, vocab);
  // Each thread owns a fixed column range of the whole table and walks the tokens in order:
  // no races, and every element is summed in token order whatever the thread count.
  // Column ranges are cache-line multiples (16 floats) so threads do not share lines.
  constexpr int64_t kChunk = 16;
  const int64_t chunks = (dim + kChunk - 1) / kChunk;
#pragma omp parallel if (vocab * dim > (1 << 15))
  {
    const int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t c0 = chunks * tid / nt, c1 = chunks * (tid + 1) / nt;
    const int64_t d0 = c0 * kChunk, d1 = std::min(dim, c1 * kChunk);
    if (d0 < d1) {
      for (int64_t r = 0; r < vocab; ++r)
        std::fill(dtable + r * dim + d0, dtable + r * dim + d1, 0.0f);
      for (int64_t t = 0; t < tokens; ++t) {
        float* dst = dtable + static_cast<int64_t>(ids[t]) * dim;
        const A* src = dout + t * dim;
        for (int64_t d = d0; d < d1; ++d)
          dst[d] += to_float(src[d]);
      }
    }
  }
}

void embedding_forward(float* out, const float* table, const int32_t* ids, int64_t tokens,
                       int64_t vocab, int64_t dim) {
  embedding_forward<float>(out, table, ids, tokens, vocab, dim);
}
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t tokens,
                        int64_t vocab, int64_t dim) {
  embedding_backward<float>(dtable, dout, ids, tokens, vocab, dim);
}

#define MEGART_EMBEDDING(A)                                                                        \
  template void embedding_forward<A>(A*, const float*, const int32_t*, int64_t, int64_t, int64_t); \
  template void embedding_backward<A>(float*, const A*, const int32_t*, int64_t, int64_t, int64_t);
MEGART_EMBEDDING(bf16_t)
MEGART_EMBEDDING(fp16_t)

} // namespace megart::cpu
