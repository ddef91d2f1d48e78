// Sums over the leading axis: reduce_sum_leading and the fixed-order second pass that the
// norm backward kernels share (detail::sum_row_blocks).
#include "cuda_detail.cuh"

namespace megart::cuda {
namespace {

// partials[blk, j] = sum of x[r, j] over the rows r of block blk, in row order, in double.
__global__ void column_partials_kernel(double *partials, const float *x, int64_t rows, int64_t cols) {
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * detail::kRowBlock;
  const int64_t r1 = min(rows, r0 + detail::kRowBlock);
  for (int64_t j = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < cols;
       j += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    double s = 0.0;
    for (int64_t r = r0; r < r1; ++r)
      s += static_cast<double>(x[r * cols + j]);
    partials[blockIdx.x * cols + j] = s;
  }
}

__global__ void sum_row_blocks_kernel(float *out, const double *partials, int64_t blocks, int64_t cols) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < cols;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double s = 0.0;
    for (int64_t b = 0; b < blocks; ++b)
      s += partials[b * cols + j];
    out[j] = static_cast<float>(s);
  }
}

} // namespace

namespace detail {

void sum_row_blocks(float *out, const double *partials, int64_t blocks, int64_t cols) {
  if (cols <= 0)
    return;
  sum_row_blocks_kernel<<<elementwise_blocks(cols), kThreads, 0, compute_stream()>>>(out, partials, blocks, cols);
  check_launch("sum_row_blocks");
}

} // namespace detail

void reduce_sum_leading(float *out, const float *x, int64_t outer, int64_t inner) {
  detail::require(outer >= 0 && inner >= 0, "reduce_sum_leading: negative shape [" + std::to_string(outer) + ", " +
                                                std::to_string(inner) + "]");
  if (inner == 0)
    return;
  if (outer == 0) { // an empty sum is 0
    zero_buffer(out, sizeof(float) * inner);
    return;
  }
  const int64_t blocks = detail::row_block_count(outer);
  auto *partials = static_cast<double *>(detail::workspace(sizeof(double) * blocks * inner));
  column_partials_kernel<<<detail::partials_grid(outer, inner), detail::kThreads, 0, compute_stream()>>>(
      partials, x, outer, inner);
  detail::check_launch("reduce_sum_leading");
  detail::sum_row_blocks(out, partials, blocks, inner);
}

} // namespace megart::cuda
