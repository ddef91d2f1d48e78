// Buffer copies, zeroing and bf16 conversion on the compute stream, reading one device scalar
// back, and the scratch workspace the reduction kernels share.
#include "cuda_detail.cuh"

#include <cuda_bf16.h>

namespace megart::cuda {

void copy_buffer(void *dst, const void *src, size_t bytes) {
  if (bytes == 0 || dst == src)
    return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute_stream()), "copy_buffer");
}

void zero_buffer(void *dst, size_t bytes) {
  if (bytes == 0)
    return;
  check(cudaMemsetAsync(dst, 0, bytes, compute_stream()), "zero_buffer");
}

namespace {
__global__ void to_bf16_kernel(uint16_t *out, const float *in, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
}
__global__ void from_bf16_kernel(float *out, const uint16_t *in, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(__ushort_as_bfloat16(in[i]));
}
} // namespace

void floats_to_bf16(uint16_t *out, const float *in, int64_t n) {
  if (n <= 0)
    return;
  to_bf16_kernel<<<detail::elementwise_blocks(n), detail::kThreads, 0, compute_stream()>>>(out, in, n);
  detail::check_launch("floats_to_bf16");
}

void bf16_to_floats(float *out, const uint16_t *in, int64_t n) {
  if (n <= 0)
    return;
  from_bf16_kernel<<<detail::elementwise_blocks(n), detail::kThreads, 0, compute_stream()>>>(out, in, n);
  detail::check_launch("bf16_to_floats");
}

float read_scalar(const float *value) {
  float host = 0.0f;
  device().copy_to_host(&host, value, sizeof(float)); // waits for the stream, with the time limit
  return host;
}

namespace detail {

void *workspace(size_t bytes) {
  static void *buffer = nullptr;
  static size_t capacity = 0;
  if (bytes <= capacity)
    return buffer;
  // Grow by half again so a slowly rising demand does not reallocate every call. The old buffer
  // is freed in stream order, after the kernels already enqueued on it. Never released: it lives
  // as long as the process, like the stream.
  const size_t grown = aligned_bytes(std::max(bytes, capacity + capacity / 2));
  if (buffer)
    check(cudaFreeAsync(buffer, compute_stream()), "workspace (cudaFreeAsync)");
  buffer = nullptr;
  capacity = 0;
  check(cudaMallocAsync(&buffer, grown, compute_stream()), "workspace (cudaMallocAsync)");
  capacity = grown;
  return buffer;
}

} // namespace detail
} // namespace megart::cuda
