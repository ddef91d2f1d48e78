// Slices and pads: pure data movement, templates over the element type (float, bf16_t, fp16_t).
#include "megart/layout_kernels.h"

#include <cstring>

namespace megart::cpu {

template <typename T>
void slice(T *out, const T *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner, int64_t offset) {
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out + o * out_dim * inner, in + (o * in_dim + offset) * inner, sizeof(T) * out_dim * inner);
}

template <typename T>
void pad(T *out, const T *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner, int64_t offset) {
  std::memset(out, 0, sizeof(T) * outer * out_dim * inner); // all-zero bits: +0 in every type
  pad_into(out, in, outer, in_dim, out_dim, inner, offset);
}

template <typename T>
void pad_into(T *out, const T *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner, int64_t offset) {
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out + (o * out_dim + offset) * inner, in + o * in_dim * inner, sizeof(T) * in_dim * inner);
}

void slice(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
           int64_t offset) {
  slice<float>(out, in, outer, in_dim, out_dim, inner, offset);
}

void pad(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
         int64_t offset) {
  pad<float>(out, in, outer, in_dim, out_dim, inner, offset);
}

void pad_into(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
              int64_t offset) {
  pad_into<float>(out, in, outer, in_dim, out_dim, inner, offset);
}

#define MEGART_LAYOUT(T)                                                                           \
  template void slice<T>(T *, const T *, int64_t, int64_t, int64_t, int64_t, int64_t);             \
  template void pad<T>(T *, const T *, int64_t, int64_t, int64_t, int64_t, int64_t);               \
  template void pad_into<T>(T *, const T *, int64_t, int64_t, int64_t, int64_t, int64_t);
MEGART_LAYOUT(bf16_t)
MEGART_LAYOUT(fp16_t)

} // namespace megart::cpu
