#include "megart/layout_kernels.h"

#include <cstring>

namespace megart::cpu {

void slice(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
           int64_t offset) {
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out + o * out_dim * inner, in + (o * in_dim + offset) * inner, sizeof(float) * out_dim * inner);
}

void pad(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
         int64_t offset) {
  std::memset(out, 0, sizeof(float) * outer * out_dim * inner);
  pad_into(out, in, outer, in_dim, out_dim, inner, offset);
}

void pad_into(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
              int64_t offset) {
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out + (o * out_dim + offset) * inner, in + o * in_dim * inner, sizeof(float) * in_dim * inner);
}

} // namespace megart::cpu
