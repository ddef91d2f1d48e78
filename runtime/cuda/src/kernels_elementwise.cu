// Broadcast add/mul over rows and scaling. Each element is read and written by the same
// thread, so out may alias a / x exactly (in place), as on the CPU.
#include "cuda_detail.cuh"

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

void scale(float *out, const float *x, float s, int64_t n) {
  if (n <= 0)
    return;
  scale_kernel<<<detail::elementwise_blocks(n), detail::kThreads, 0, compute_stream()>>>(out, x, s, n);
  detail::check_launch("scale");
}

} // namespace megart::cuda
