// Fused attention backward (flash-attention-2 style split, fp32), after the statistics pre-pass
// (forward_kernel<D, true>) has written each query row's lse and delta = dout . out:
//   p_ij = exp(scale q_i.k_j - lse_i),  ds_ij = p_ij (m_ij dout_i.v_j - delta_i),
//   dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i,  dv_j = sum_i m_ij p_ij dout_i,
// with m_ij dropout's mask / (1 - rate) (1 without dropout), recomputed from its key.
// dq_kernel owns query rows and walks the keys; dkv_kernel owns key rows and walks the queries
// of every head of its group. Each output element is written by one thread that sums in a
// fixed order: no atomics, deterministic.
#pragma once

#include "attention_common.cuh"

#include <cstddef>

namespace megart::cuda::attention {

// Tile sizes keep every kernel within 99 KiB of shared memory (the opt-in limit of sm_86/89;
// sm_80 allows 163, sm_90 227).

// ---- dq: 64 query rows per block, key tiles of 64 (16 for wide heads) -------------------------

constexpr int kDqRows = 64;
template <int D> constexpr int dq_keys() { return D <= 64 ? 64 : 16; }

template <int D> constexpr size_t dq_smem_bytes() {
  constexpr int BQ = kDqRows, BK = dq_keys<D>();
  return sizeof(float) * (2 * BQ * padded<D>() + 2 * BK * padded<D>() + BQ * (BK + 1));
}

// Grid (row tiles, q_heads, batch). Q and dout rows stay in shared memory; K and V stream
// through; ds of a tile goes through shared memory so each thread can add its rows' ds k.
template <int D>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(float *dq, const float *q, const float *k, const float *v, const float *dout, const float *lse,
              const float *delta, Shape s) {
  constexpr int BQ = kDqRows, BK = dq_keys<D>(), P = padded<D>();
  constexpr int RQ = BQ / kGrid, CK = BK / kGrid, CD = D / kGrid;
  extern __shared__ float smem[];
  float *qs = smem, *dos = qs + BQ * P, *ks = dos + BQ * P, *vs = ks + BK * P;
  float *dss = vs + BK * P; // [BQ][BK + 1]
  const int ty = threadIdx.x / kGrid, tx = threadIdx.x % kGrid;
  const int64_t b = blockIdx.z;
  const int h = blockIdx.y, g = h / s.group;
  const int64_t q0 = int64_t(blockIdx.x) * BQ;
  const int64_t q_stride = int64_t(s.q_heads) * s.head_dim, kv_stride = int64_t(s.kv_heads) * s.head_dim;
  const int64_t q_head = (b * s.seq * s.q_heads + h) * s.head_dim;
  const int64_t kv_head = (b * s.seq * s.kv_heads + g) * s.head_dim;
  const int64_t stats = (b * s.q_heads + h) * s.seq;

  load_tile<BQ, D>(qs, q + q_head, q0, s.seq, q_stride, s.head_dim);
  load_tile<BQ, D>(dos, dout + q_head, q0, s.seq, q_stride, s.head_dim);
  float row_lse[RQ], row_delta[RQ], acc[RQ][CD];
#pragma unroll
  for (int i = 0; i < RQ; ++i) {
    const int64_t row = q0 + ty + kGrid * i;
    row_lse[i] = row < s.seq ? lse[stats + row] : 0.0f;
    row_delta[i] = row < s.seq ? delta[stats + row] : 0.0f;
#pragma unroll
    for (int c = 0; c < CD; ++c)
      acc[i][c] = 0.0f;
  }
  const int64_t key_end = s.causal && q0 + BQ < s.seq ? q0 + BQ : s.seq;
  for (int64_t k0 = first_key_tile<BK>(q0, s); k0 < key_end; k0 += BK) {
    __syncthreads(); // the previous tile's readers are done
    load_tile<BK, D>(ks, k + kv_head, k0, s.seq, kv_stride, s.head_dim);
    load_tile<BK, D>(vs, v + kv_head, k0, s.seq, kv_stride, s.head_dim);
    __syncthreads();

    float sc[RQ][CK] = {}, dp[RQ][CK] = {};
#pragma unroll 4
    for (int d = 0; d < D; ++d) {
      float qv[RQ], dov[RQ], kv[CK], vv[CK];
#pragma unroll
      for (int i = 0; i < RQ; ++i) {
        qv[i] = qs[(ty + kGrid * i) * P + d];
        dov[i] = dos[(ty + kGrid * i) * P + d];
      }
#pragma unroll
      for (int j = 0; j < CK; ++j) {
        kv[j] = ks[(tx + kGrid * j) * P + d];
        vv[j] = vs[(tx + kGrid * j) * P + d];
      }
#pragma unroll
      for (int i = 0; i < RQ; ++i)
#pragma unroll
        for (int j = 0; j < CK; ++j) {
          sc[i][j] = fmaf(qv[i], kv[j], sc[i][j]);
          dp[i][j] = fmaf(dov[i], vv[j], dp[i][j]);
        }
    }
#pragma unroll
    for (int i = 0; i < RQ; ++i) {
      const int64_t row = q0 + ty + kGrid * i;
#pragma unroll
      for (int j = 0; j < CK; ++j) {
        const int64_t key = k0 + tx + kGrid * j;
        const float p = visible(row, key, s) ? expf(s.scale * sc[i][j] - row_lse[i]) : 0.0f;
        const float m = dropout_factor(s, b, h, row, key);
        dss[(ty + kGrid * i) * (BK + 1) + tx + kGrid * j] = p * (m * dp[i][j] - row_delta[i]);
      }
    }
    __syncthreads(); // dss complete

#pragma unroll 4
    for (int kk = 0; kk < BK; ++kk) {
      float dsv[RQ], kv[CD];
#pragma unroll
      for (int i = 0; i < RQ; ++i)
        dsv[i] = dss[(ty + kGrid * i) * (BK + 1) + kk];
#pragma unroll
      for (int c = 0; c < CD; ++c)
        kv[c] = ks[kk * P + tx + kGrid * c];
#pragma unroll
      for (int i = 0; i < RQ; ++i)
#pragma unroll
        for (int c = 0; c < CD; ++c)
          acc[i][c] = fmaf(dsv[i], kv[c], acc[i][c]);
    }
  }

#pragma unroll
  for (int i = 0; i < RQ; ++i) {
    const int64_t row = q0 + ty + kGrid * i;
    if (row >= s.seq)
      continue;
#pragma unroll
    for (int c = 0; c < CD; ++c) {
      const int d = tx + kGrid * c;
      if (d < s.head_dim)
        dq[q_head + row * q_stride + d] = s.scale * acc[i][c];
    }
  }
}

// ---- dk, dv: 64 key rows per block, query tiles of 32 (16 for wide heads) ---------------------

constexpr int kDkvKeys = 64;
template <int D> constexpr int dkv_rows() { return D <= 64 ? 32 : 16; }

template <int D> constexpr size_t dkv_smem_bytes() {
  constexpr int BK = kDkvKeys, BQ = dkv_rows<D>();
  return sizeof(float) * (2 * BK * padded<D>() + 2 * BQ * padded<D>() + 2 * BK * (BQ + 1) + 2 * BQ);
}

// Grid (key tiles, kv_heads, batch). K and V rows stay in shared memory; for each query head
// of the group in order, query rows, dout rows and their statistics stream through. Each
// thread keeps 4 x D/16 slices of dk and dv; p and ds of a tile (transposed: keys x queries)
// go through shared memory so each thread can add its keys' p dout and ds q.
template <int D>
__global__ void __launch_bounds__(kThreads)
    dkv_kernel(float *dk, float *dv, const float *q, const float *k, const float *v, const float *dout,
               const float *lse, const float *delta, Shape s) {
  constexpr int BK = kDkvKeys, BQ = dkv_rows<D>(), P = padded<D>();
  constexpr int RK = BK / kGrid, CQ = BQ / kGrid, CD = D / kGrid;
  extern __shared__ float smem[];
  float *ks = smem, *vs = ks + BK * P, *qs = vs + BK * P, *dos = qs + BQ * P;
  float *ps = dos + BQ * P, *dss = ps + BK * (BQ + 1); // [BK][BQ + 1]
  float *lse_s = dss + BK * (BQ + 1), *delta_s = lse_s + BQ;
  const int ty = threadIdx.x / kGrid, tx = threadIdx.x % kGrid;
  const int64_t b = blockIdx.z;
  const int g = blockIdx.y;
  const int64_t k0 = int64_t(blockIdx.x) * BK;
  const int64_t q_stride = int64_t(s.q_heads) * s.head_dim, kv_stride = int64_t(s.kv_heads) * s.head_dim;
  const int64_t kv_head = (b * s.seq * s.kv_heads + g) * s.head_dim;

  load_tile<BK, D>(ks, k + kv_head, k0, s.seq, kv_stride, s.head_dim);
  load_tile<BK, D>(vs, v + kv_head, k0, s.seq, kv_stride, s.head_dim);
  float adk[RK][CD], adv[RK][CD];
#pragma unroll
  for (int i = 0; i < RK; ++i)
#pragma unroll
    for (int c = 0; c < CD; ++c) {
      adk[i][c] = 0.0f;
      adv[i][c] = 0.0f;
    }
  // Causal: query rows before the block's first key see none of its keys.
  const int64_t q_begin = s.causal ? k0 / BQ * BQ : 0;
  // A window: query rows past the block's last key + window see none of its keys.
  const int64_t q_end = s.causal && s.window > 0 && k0 + BK + s.window < s.seq ? k0 + BK + s.window : s.seq;
  for (int hh = 0; hh < s.group; ++hh) {
    const int h = g * s.group + hh;
    const int64_t q_head = (b * s.seq * s.q_heads + h) * s.head_dim;
    const int64_t stats = (b * s.q_heads + h) * s.seq;
    for (int64_t q0 = q_begin; q0 < q_end; q0 += BQ) {
      __syncthreads(); // the previous tile's readers are done
      load_tile<BQ, D>(qs, q + q_head, q0, s.seq, q_stride, s.head_dim);
      load_tile<BQ, D>(dos, dout + q_head, q0, s.seq, q_stride, s.head_dim);
      for (int r = threadIdx.x; r < BQ; r += kThreads) {
        const bool valid = q0 + r < s.seq;
        lse_s[r] = valid ? lse[stats + q0 + r] : 0.0f;
        delta_s[r] = valid ? delta[stats + q0 + r] : 0.0f;
      }
      __syncthreads();

      float sc[RK][CQ] = {}, dp[RK][CQ] = {};
#pragma unroll 4
      for (int d = 0; d < D; ++d) {
        float kv[RK], vv[RK], qv[CQ], dov[CQ];
#pragma unroll
        for (int i = 0; i < RK; ++i) {
          kv[i] = ks[(ty + kGrid * i) * P + d];
          vv[i] = vs[(ty + kGrid * i) * P + d];
        }
#pragma unroll
        for (int j = 0; j < CQ; ++j) {
          qv[j] = qs[(tx + kGrid * j) * P + d];
          dov[j] = dos[(tx + kGrid * j) * P + d];
        }
#pragma unroll
        for (int i = 0; i < RK; ++i)
#pragma unroll
          for (int j = 0; j < CQ; ++j) {
            sc[i][j] = fmaf(kv[i], qv[j], sc[i][j]);
            dp[i][j] = fmaf(vv[i], dov[j], dp[i][j]);
          }
      }
#pragma unroll
      for (int i = 0; i < RK; ++i) {
        const int64_t key = k0 + ty + kGrid * i;
#pragma unroll
        for (int j = 0; j < CQ; ++j) {
          const int r = tx + kGrid * j;
          const float p = visible(q0 + r, key, s) ? expf(s.scale * sc[i][j] - lse_s[r]) : 0.0f;
          const float m = dropout_factor(s, b, h, q0 + r, key);
          ps[(ty + kGrid * i) * (BQ + 1) + r] = m * p;
          dss[(ty + kGrid * i) * (BQ + 1) + r] = p * (m * dp[i][j] - delta_s[r]);
        }
      }
      __syncthreads(); // ps, dss complete

#pragma unroll 4
      for (int r = 0; r < BQ; ++r) {
        float pv[RK], dsv[RK], dov[CD], qv[CD];
#pragma unroll
        for (int i = 0; i < RK; ++i) {
          pv[i] = ps[(ty + kGrid * i) * (BQ + 1) + r];
          dsv[i] = dss[(ty + kGrid * i) * (BQ + 1) + r];
        }
#pragma unroll
        for (int c = 0; c < CD; ++c) {
          dov[c] = dos[r * P + tx + kGrid * c];
          qv[c] = qs[r * P + tx + kGrid * c];
        }
#pragma unroll
        for (int i = 0; i < RK; ++i)
#pragma unroll
          for (int c = 0; c < CD; ++c) {
            adv[i][c] = fmaf(pv[i], dov[c], adv[i][c]);
            adk[i][c] = fmaf(dsv[i], qv[c], adk[i][c]);
          }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < RK; ++i) {
    const int64_t key = k0 + ty + kGrid * i;
    if (key >= s.seq)
      continue;
#pragma unroll
    for (int c = 0; c < CD; ++c) {
      const int d = tx + kGrid * c;
      if (d < s.head_dim) {
        dk[kv_head + key * kv_stride + d] = s.scale * adk[i][c];
        dv[kv_head + key * kv_stride + d] = adv[i][c];
      }
    }
  }
}

} // namespace megart::cuda::attention
