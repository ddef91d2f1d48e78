// Broadcast add/mul over rows, scaling and dropout. Each element is read and written by the same
// thread, so out may alias a / x exactly (in place), as on the CPU.
#include "cuda_detail.cuh"

#include "megart/cuda/kernels.h"
#include "megart/dropout.h"

namespace megart::cuda {
namespace {

struct Add {
  __device__ float operator()(float x, float y) const { return x + y; }
};
struct Mul {
  __device__ float operator()(float x, float y) const { return x * y; }
};

// out[i, j] = op(a[i, j], b[j]) over the flat index.
template <typename Op>
__global__ void broadcast_kernel(float *out, const float *a, const float *b, int64_t n, int64_t inner, Op op) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = op(a[i], b[i % inner]);
}

// y = x * mask / (1 - rate) over the block (megart/dropout.h); y may be x.
__global__ void dropout_kernel(float *y, const float *x, DropoutBlock b, int64_t n, uint64_t threshold,
                               float keep_scale) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = dropout_bits(b.key, dropout_global_index(b, i)) >= threshold ? x[i] * keep_scale : 0.0f;
}

__global__ void scale_kernel(float *out, const float *x, float s, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = x[i] * s;
}

template <typename Op>
void broadcast(const char *name, float *out, const float *a, const float *b, int64_t outer, int64_t inner, Op op) {
  detail::require(outer >= 0 && inner >= 0, std::string(name) + ": negative shape [" + std::to_string(outer) + ", " +
                                                std::to_string(inner) + "]");
  const int64_t n = outer * inner;
  if (n == 0)
    return;
  broadcast_kernel<<<detail::elementwise_blocks(n), detail::kThreads, 0, compute_stream()>>>(out, a, b, n, inner, op);
  detail::check_launch(name);
}

} // namespace

void add(float *out, const float *a, const float *b, int64_t outer, int64_t inner) {
  broadcast("add", out, a, b, outer, inner, Add{});
}

void mul(float *out, const float *a, const float *b, int64_t outer, int64_t inner) {
  broadcast("mul", out, a, b, outer, inner, Mul{});
}

void apply_dropout(float *y, const float *x, const DropoutBlock &block) {
  const std::string error = dropout_block_error(block);
  detail::require(error.empty(), "apply_dropout: " + error);
  int64_t n = 1;
  for (int d = 0; d < block.rank; ++d)
    n *= block.shape[d];
  if (n == 0)
    return;
  if (block.rate == 0.0f) {
    if (y != x)
      copy_buffer(y, x, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  dropout_kernel<<<detail::elementwise_blocks(n), detail::kThreads, 0, compute_stream()>>>(
      y, x, block, n, dropout_keep_threshold(block.rate), dropout_keep_scale(block.rate));
  detail::check_launch("apply_dropout");
}

void scale(float *out, const float *x, float s, int64_t n) {
  if (n <= 0)
    return;
  scale_kernel<<<detail::elementwise_blocks(n), detail::kThreads, 0, compute_stream()>>>(out, x, s, n);
  detail::check_launch("scale");
}

} // namespace megart::cuda
