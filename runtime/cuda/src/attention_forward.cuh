// Fused attention forward (flash-style, fp32) and the backward's statistics pre-pass, which is
// the same kernel writing per-row softmax statistics instead of the output.
#pragma once

#include "attention_common.cuh"

#include <cstddef>

namespace megart::cuda::attention {

// Query rows per block; key rows per tile (fewer for wide heads, to bound shared memory).
constexpr int kForwardRows = 64;
template <int D> constexpr int forward_keys() { return D <= 64 ? 64 : 32; }

template <int D> constexpr size_t forward_smem_bytes() {
  constexpr int BQ = kForwardRows, BK = forward_keys<D>();
  return sizeof(float) * (BQ * padded<D>() + 2 * BK * padded<D>() + BQ * (BK + 1));
}

// One block: 64 query rows of one (batch, head); grid (row tiles, q_heads, batch). Q stays in
// shared memory while K and V stream through in tiles of BK keys. Each thread keeps a 4 x D/16
// slice of the output and its rows' running max m and sum l (online softmax): the scores of a
// tile are rescaled into the running output, so no score matrix outlives a tile.
// kStats (the backward's pre-pass): instead of out, writes per row lse = m + log l and
// delta = dout . out (= sum_j p_j dp_j, the softmax backward's row term, with dp_j = m_j dout . v_j
// under dropout's m_j), indexed
// [batch, q_head, seq].
template <int D, bool kStats>
__global__ void __launch_bounds__(kThreads) forward_kernel(float *out, float *lse, float *delta, const float *q,
                                                           const float *k, const float *v, const float *dout, Shape s) {
  constexpr int BQ = kForwardRows, BK = forward_keys<D>(), P = padded<D>();
  constexpr int RQ = BQ / kGrid, CK = BK / kGrid, CD = D / kGrid;
  extern __shared__ float smem[];
  float *qs = smem, *ks = qs + BQ * P, *vs = ks + BK * P, *ps = vs + BK * P; // ps: [BQ][BK + 1]
  const int ty = threadIdx.x / kGrid, tx = threadIdx.x % kGrid;
  const int64_t b = blockIdx.z;
  const int h = blockIdx.y, g = h / s.group;
  const int64_t q0 = int64_t(blockIdx.x) * BQ;
  const int64_t q_stride = int64_t(s.q_heads) * s.head_dim, kv_stride = int64_t(s.kv_heads) * s.head_dim;
  const int64_t q_head = (b * s.seq * s.q_heads + h) * s.head_dim;
  const int64_t kv_head = (b * s.seq * s.kv_heads + g) * s.head_dim;

  load_tile<BQ, D>(qs, q + q_head, q0, s.seq, q_stride, s.head_dim);
  float o[RQ][CD], m[RQ], l[RQ];
#pragma unroll
  for (int i = 0; i < RQ; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < CD; ++c)
      o[i][c] = 0.0f;
  }
  // Causal: keys past the block's last row are masked for all of its rows.
  const int64_t key_end = s.causal && q0 + BQ < s.seq ? q0 + BQ : s.seq;
  for (int64_t k0 = first_key_tile<BK>(q0, s); k0 < key_end; k0 += BK) {
    __syncthreads(); // the previous tile's readers are done
    load_tile<BK, D>(ks, k + kv_head, k0, s.seq, kv_stride, s.head_dim);
    load_tile<BK, D>(vs, v + kv_head, k0, s.seq, kv_stride, s.head_dim);
    __syncthreads();

    float sc[RQ][CK] = {};
#pragma unroll 8
    for (int d = 0; d < D; ++d) {
      float qv[RQ], kv[CK];
#pragma unroll
      for (int i = 0; i < RQ; ++i)
        qv[i] = qs[(ty + kGrid * i) * P + d];
#pragma unroll
      for (int j = 0; j < CK; ++j)
        kv[j] = ks[(tx + kGrid * j) * P + d];
#pragma unroll
      for (int i = 0; i < RQ; ++i)
#pragma unroll
        for (int j = 0; j < CK; ++j)
          sc[i][j] = fmaf(qv[i], kv[j], sc[i][j]);
    }

#pragma unroll
    for (int i = 0; i < RQ; ++i) {
      const int64_t row = q0 + ty + kGrid * i;
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < CK; ++j) {
        sc[i][j] = visible(row, k0 + tx + kGrid * j, s) ? s.scale * sc[i][j] : -INFINITY;
        mx = fmaxf(mx, sc[i][j]);
      }
      const float m_new = fmaxf(m[i], row_max(mx));
      // A row that has seen only masked keys keeps m = -inf; shifting by 0 then gives p = 0
      // (and a rescale of 0) instead of NaN from -inf - -inf.
      const float shift = m_new == -INFINITY ? 0.0f : m_new;
      const float rescale = expf(m[i] - shift);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < CK; ++j) {
        const float p = expf(sc[i][j] - shift);
        // Dropout scales what multiplies V, not the softmax's normalizer.
        ps[(ty + kGrid * i) * (BK + 1) + tx + kGrid * j] = p * dropout_factor(s, b, h, row, k0 + tx + kGrid * j);
        sum += p;
      }
      l[i] = l[i] * rescale + row_sum(sum);
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < CD; ++c)
        o[i][c] *= rescale;
    }
    __syncthreads(); // ps complete

#pragma unroll 4
    for (int kk = 0; kk < BK; ++kk) {
      float pv[RQ], vv[CD];
#pragma unroll
      for (int i = 0; i < RQ; ++i)
        pv[i] = ps[(ty + kGrid * i) * (BK + 1) + kk];
#pragma unroll
      for (int c = 0; c < CD; ++c)
        vv[c] = vs[kk * P + tx + kGrid * c];
#pragma unroll
      for (int i = 0; i < RQ; ++i)
#pragma unroll
        for (int c = 0; c < CD; ++c)
          o[i][c] = fmaf(pv[i], vv[c], o[i][c]);
    }
  }

#pragma unroll
  for (int i = 0; i < RQ; ++i) {
    const int64_t row = q0 + ty + kGrid * i;
    const bool valid = row < s.seq; // padding rows have l = 0
    const float inv = valid ? 1.0f / l[i] : 0.0f;
    if constexpr (kStats) {
      float dot = 0.0f;
#pragma unroll
      for (int c = 0; c < CD; ++c) {
        const int d = tx + kGrid * c;
        if (valid && d < s.head_dim)
          dot += dout[q_head + row * q_stride + d] * (o[i][c] * inv);
      }
      dot = row_sum(dot); // every thread of the row group shuffles, valid or not
      if (valid && tx == 0) {
        const int64_t at = (b * s.q_heads + h) * s.seq + row;
        lse[at] = m[i] + logf(l[i]);
        delta[at] = dot;
      }
    } else if (valid) {
#pragma unroll
      for (int c = 0; c < CD; ++c) {
        const int d = tx + kGrid * c;
        if (d < s.head_dim)
          out[q_head + row * q_stride + d] = o[i][c] * inv;
      }
    }
  }
}

} // namespace megart::cuda::attention
