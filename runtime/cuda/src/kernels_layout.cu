// Contiguous slices along one dimension of [outer, dim, inner] tensors and their gradient
// (pad) or assembly (pad_into). Elementwise copies over the flat index of the smaller tensor.
#include "cuda_detail.cuh"

namespace megart::cuda {
namespace {

// out[o, :, :] = in[o, offset : offset + out_dim, :], over the flat output index.
__global__ void slice_kernel(float *out, const float *in, int64_t n, int64_t in_row, int64_t out_row,
                             int64_t shift) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = i / out_row, k = i - o * out_row;
    out[i] = in[o * in_row + shift + k];
  }
}

// out[o, offset : offset + in_dim, :] = in[o, :, :], over the flat input index.
__global__ void pad_into_kernel(float *out, const float *in, int64_t n, int64_t in_row, int64_t out_row,
                                int64_t shift) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = i / in_row, k = i - o * in_row;
    out[o * out_row + shift + k] = in[i];
  }
}

// The window [offset, offset + small) must lie inside [0, large).
void check_window(const char *kernel, int64_t outer, int64_t large, int64_t small, int64_t inner, int64_t offset) {
  if (outer < 0 || inner < 0 || small < 0 || offset < 0 || offset + small > large)
    throw Error(std::string(kernel) + ": window [" + std::to_string(offset) + ", " + std::to_string(offset + small) +
                ") of a dimension of " + std::to_string(large) + " (outer " + std::to_string(outer) + ", inner " +
                std::to_string(inner) + ") is out of range");
}

} // namespace

void slice(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
           int64_t offset) {
  check_window("slice", outer, in_dim, out_dim, inner, offset);
  const int64_t n = outer * out_dim * inner;
  if (n == 0)
    return;
  slice_kernel<<<detail::elementwise_blocks(n), detail::kThreads, 0, compute_stream()>>>(
      out, in, n, in_dim * inner, out_dim * inner, offset * inner);
  detail::check_launch("slice");
}

void pad_into(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
              int64_t offset) {
  check_window("pad_into", outer, out_dim, in_dim, inner, offset);
  const int64_t n = outer * in_dim * inner;
  if (n == 0)
    return;
  pad_into_kernel<<<detail::elementwise_blocks(n), detail::kThreads, 0, compute_stream()>>>(
      out, in, n, in_dim * inner, out_dim * inner, offset * inner);
  detail::check_launch("pad_into");
}

void pad(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
         int64_t offset) {
  check_window("pad", outer, out_dim, in_dim, inner, offset);
  zero_buffer(out, sizeof(float) * outer * out_dim * inner); // stream order: zeroed before the copy
  pad_into(out, in, outer, in_dim, out_dim, inner, offset);
}

} // namespace megart::cuda
