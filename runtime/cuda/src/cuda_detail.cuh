// Private helpers of the CUDA kernel sources: launch shapes, launch checks, block reductions,
// the shared scratch workspace and the fixed-order column sums. Not part of the public API.
#pragma once

#include "megart/cuda/device.h"
#include "megart/cuda/kernels.h"
#include "megart/error.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
#include <string>

namespace megart::cuda::detail {

// Threads per block of every kernel here (a multiple of the warp size: the reductions need it).
constexpr int kThreads = 256;
// Grid-stride loops cover whatever a capped grid leaves, so huge tensors need no 2^31 checks.
constexpr int64_t kMaxBlocks = 1 << 20;

// Blocks for an elementwise kernel over n items, kThreads items per block per pass.
inline unsigned elementwise_blocks(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}
// Blocks for a one-block-per-row kernel (rows beyond the cap loop by gridDim.x).
inline unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, kMaxBlocks)); }

// Whether vocabulary id `id` is in the share [start, start + local) of this tensor-parallel rank.
__device__ inline bool in_share(int32_t id, int64_t start, int64_t local) { return id >= start && id < start + local; }

// Launches are asynchronous: this reports bad configurations, not faults inside the kernel.
inline void check_launch(const char *kernel) { check(cudaGetLastError(), kernel); }

inline void require(bool ok, const std::string &message) {
  if (!ok)
    throw Error(message);
}

// Scratch device memory of at least `bytes`, 256-byte aligned, valid until the next call. One
// buffer grown on demand: every user enqueues on compute_stream(), so stream order makes reuse
// safe (a later kernel's writes run after an earlier kernel's reads). Not thread-safe: the
// training step drives the stream from one thread.
void *workspace(size_t bytes);

// Bytes rounded up so the next carve-out of a workspace stays 256-byte aligned.
inline size_t aligned_bytes(size_t bytes) { return (bytes + 255) / 256 * 256; }

// ---- Row reductions over fixed row blocks -----------------------------------------------
// Sums over the rows of a [rows, cols] matrix are formed as the CPU kernels form them: double
// partials over blocks of kRowBlock rows, then the partials added in block order. Fixed shapes
// make the result independent of scheduling.
constexpr int64_t kRowBlock = 32;
inline int64_t row_block_count(int64_t rows) { return (rows + kRowBlock - 1) / kRowBlock; }
// Grid y (and z) is limited to 65535 blocks.
constexpr int64_t kMaxGridY = 65535;
// Launch shape of a partials kernel: x = row block, y = tile of kThreads columns (capped at
// kMaxGridY; the kernels loop over the columns beyond by gridDim.y tiles).
inline dim3 partials_grid(int64_t rows, int64_t cols) {
  return dim3(static_cast<unsigned>(row_block_count(rows)),
              static_cast<unsigned>(std::min<int64_t>((cols + kThreads - 1) / kThreads, kMaxGridY)));
}
// out[j] = (float) sum over b of partials[b * cols + j], in block order.
void sum_row_blocks(float *out, const double *partials, int64_t blocks, int64_t cols);

// ---- Device-side reductions ---------------------------------------------------------------

template <typename T> __device__ inline T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block, returned to every thread. The shape (per-thread strided sums, then the
// warp tree, then the warps in order) is fixed by blockDim, so results are reproducible. Every
// thread of the block must call it (it synchronises).
template <typename T> __device__ inline T block_sum(T v) {
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads(); // an earlier call's readers are done with `partial`
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : T(0);
  return warp_sum(v);
}

// The labels of [0, tokens) that are not ignore_index, by one block, to every thread (a loss's
// denominator).
__device__ inline double block_counted_labels(const int32_t *labels, int64_t tokens, int32_t ignore_index) {
  double n = 0.0;
  for (int64_t t = threadIdx.x; t < tokens; t += blockDim.x)
    n += labels[t] != ignore_index;
  return block_sum(n);
}

// *scale = dloss / the labels that count (0 when none does): a loss gradient's scale when labels
// are ignored; launched as a single block. Each file that launches it has its own copy.
static __global__ void counted_loss_scale_kernel(double *scale, float dloss, const int32_t *labels, int64_t tokens,
                                                 int32_t ignore_index) {
  const double counted = block_counted_labels(labels, tokens, ignore_index);
  if (threadIdx.x == 0)
    *scale = counted > 0.0 ? static_cast<double>(dloss) / counted : 0.0;
}

// Sum of values[0, n) by one block (threads stride over them, then block_sum), to every thread.
__device__ inline double block_sum_of(const double *values, int64_t n) {
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += values[i];
  return block_sum(s);
}

// Max over the block (fmaxf: NaN inputs are ignored, as std::fmax does), returned to every thread.
__device__ inline float block_max(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : -INFINITY;
  return warp_max(v);
}

// Online softmax statistics of a set of values: their max m and sum of exp(x - m).
struct MaxSum {
  float max;
  double sum;
};

// Adds one value: when it raises the max the sum so far is rescaled to the new max.
__device__ inline void max_sum_add(MaxSum &a, float x) {
  if (x == -INFINITY) // adds exp(-inf) = 0; while the max is -inf too, x - max would be NaN
    return;
  if (x > a.max) {
    a.sum *= exp(static_cast<double>(a.max) - static_cast<double>(x)); // 0 when max was -inf
    a.max = x;
  }
  a.sum += static_cast<double>(expf(x - a.max));
}

__device__ inline MaxSum max_sum_merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) // both empty: exp(-inf - -inf) would be NaN
    return {m, 0.0};
  const double sa = a.max == -INFINITY ? 0.0 : a.sum * exp(static_cast<double>(a.max) - m);
  const double sb = b.max == -INFINITY ? 0.0 : b.sum * exp(static_cast<double>(b.max) - m);
  return {m, sa + sb};
}

// Merges every thread's statistics; the result reaches every thread. Fixed tree: reproducible.
__device__ inline MaxSum block_max_sum(MaxSum v) {
  __shared__ float pmax[32];
  __shared__ double psum[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int offset = 16; offset > 0; offset >>= 1)
    v = max_sum_merge(v, {__shfl_xor_sync(0xffffffffu, v.max, offset), __shfl_xor_sync(0xffffffffu, v.sum, offset)});
  __syncthreads();
  if (lane == 0) {
    pmax[warp] = v.max;
    psum[warp] = v.sum;
  }
  __syncthreads();
  v = lane < warps ? MaxSum{pmax[lane], psum[lane]} : MaxSum{-INFINITY, 0.0};
  for (int offset = 16; offset > 0; offset >>= 1)
    v = max_sum_merge(v, {__shfl_xor_sync(0xffffffffu, v.max, offset), __shfl_xor_sync(0xffffffffu, v.sum, offset)});
  return v;
}

} // namespace megart::cuda::detail
