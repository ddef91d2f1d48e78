// Data-movement kernels: contiguous slices along one dimension and their gradient.
#pragma once

#include "megart/half.h"

#include <cstdint>

namespace megart::cpu {

// in is [outer, in_dim, inner]; out = in[:, offset : offset + out_dim, :].
void slice(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
           int64_t offset);

// The gradient of slice: out is [outer, out_dim, inner], zero except
// out[:, offset : offset + in_dim, :] = in. (Arguments: in is the small tensor.)
void pad(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
         int64_t offset);

// Like pad, but leaves the rest of `out` as it is (to assemble a tensor from blocks).
void pad_into(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
              int64_t offset);

// The same for 16-bit tensors (T = bf16_t or fp16_t): the bits move unchanged.
template <typename T>
void slice(T *out, const T *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner, int64_t offset);
template <typename T>
void pad(T *out, const T *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner, int64_t offset);
template <typename T>
void pad_into(T *out, const T *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner, int64_t offset);

} // namespace megart::cpu
