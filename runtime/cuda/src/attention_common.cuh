// Shared pieces of the fused attention kernels (kernels_attention.cu): the thread layout, the
// problem shape, tile loads and row reductions. Device code only.
#pragma once

#include "megart/dropout.h"

#include <cstdint>

namespace megart::cuda::attention {

// 256 threads as a 16 x 16 grid: thread (ty, tx) = (tid / 16, tid % 16) owns tile rows
// ty + 16 i and columns tx + 16 j. The 16 threads of one row group are one half-warp, so a
// reduction along a row is four xor shuffles and never leaves the warp.
constexpr int kThreads = 256;
constexpr int kGrid = 16;

// Tile rows in shared memory are padded to an odd stride (D + 1): threads reading one column
// of 16 different rows then hit 16 different banks.
template <int D> constexpr int padded() { return D + 1; }

struct Shape {
  int64_t seq;
  int q_heads, kv_heads, group; // group = q_heads / kv_heads
  int head_dim;                 // <= the kernel's D (columns past it are zero in shared memory)
  float scale;
  bool causal;
  int64_t window;           // causal only: a query sees itself and at most `window` keys before it; 0: all
  AttentionDropout dropout; // rate 0: none
};

// Probability (row, key) of local head h of batch b: its dropout mask / (1 - rate), or 1.
__device__ __forceinline__ float dropout_factor(const Shape &s, int64_t b, int h, int64_t row, int64_t key) {
  return attention_dropout_factor(s.dropout, b, h, row, key, s.seq);
}

// Rows [row0, row0 + ROWS) of one head into tile[ROWS][D + 1]. `head` points at (batch, seq 0,
// head, 0); rows are `row_stride` floats apart. Rows past seq and columns past head_dim are
// zero, so they add nothing to dot products.
template <int ROWS, int D>
__device__ __forceinline__ void load_tile(float *tile, const float *head, int64_t row0, int64_t seq, int64_t row_stride,
                                          int head_dim) {
  for (int idx = threadIdx.x; idx < ROWS * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    const int64_t row = row0 + r;
    tile[r * padded<D>() + d] = row < seq && d < head_dim ? head[row * row_stride + d] : 0.0f;
  }
}

// Max / sum over the 16 threads of a row group (a fixed butterfly: deterministic).
__device__ __forceinline__ float row_max(float v) {
  for (int offset = kGrid / 2; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float row_sum(float v) {
  for (int offset = kGrid / 2; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Whether query row `row` attends to key `key` (padding rows and keys past seq attend nothing).
__device__ __forceinline__ bool visible(int64_t row, int64_t key, const Shape &s) {
  return row < s.seq && key < s.seq && (!s.causal || (key <= row && (s.window == 0 || row - key <= s.window)));
}

// The first key tile (of BK keys) a block of query rows from q0 on can see: keys before
// q0 - window are outside every row's window.
template <int BK> __device__ __forceinline__ int64_t first_key_tile(int64_t q0, const Shape &s) {
  return s.causal && s.window > 0 && q0 > s.window ? (q0 - s.window) / BK * BK : 0;
}

} // namespace megart::cuda::attention
