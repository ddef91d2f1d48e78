// GELU (tanh and erf forms) and SwiGLU, forward and backward: the CPU formulas in float with
// CUDA's accurate (not fast-math) tanhf / erff / expf. Each element is read and written by one
// thread, so outputs may alias inputs exactly.
#include "cuda_detail.cuh"

namespace megart::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f; // sqrt(2/pi)
constexpr float kGeluCoef = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;   // 1/sqrt(2)
constexpr float kInvSqrt2Pi = 0.3989422804014327f; // 1/sqrt(2 pi)

struct GeluTanhForward {
  float *y;
  const float *x;
  __device__ void operator()(int64_t i) const {
    const float v = x[i];
    const float t = tanhf(kSqrt2OverPi * (v + kGeluCoef * (v * v * v)));
    y[i] = 0.5f * v * (1.0f + t);
  }
};

// d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 c x^2),  t = tanh(u).
struct GeluTanhBackward {
  float *dx;
  const float *dy, *x;
  __device__ void operator()(int64_t i) const {
    const float v = x[i];
    const float v2 = v * v;
    const float t = tanhf(kSqrt2OverPi * (v + kGeluCoef * v2 * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoef * v2);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
};

struct GeluErfForward {
  float *y;
  const float *x;
  __device__ void operator()(int64_t i) const {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * kInvSqrt2));
  }
};

struct GeluErfBackward {
  float *dx;
  const float *dy, *x;
  __device__ void operator()(int64_t i) const {
    const float v = x[i];
    const float cdf = 0.5f * (1.0f + erff(v * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
};

// torch's silu: g / (1 + exp(-g)); for g < -88 exp overflows to inf and this gives -0.
struct SwigluForward {
  float *y;
  const float *gate, *up;
  __device__ void operator()(int64_t i) const {
    const float g = gate[i];
    y[i] = g / (1.0f + expf(-g)) * up[i];
  }
};

// silu'(g) = s (1 + g (1 - s)),  s = sigmoid(g). All inputs are read before either output is
// written, so dgate / dup may alias inputs.
struct SwigluBackward {
  float *dgate, *dup;
  const float *dy, *gate, *up;
  __device__ void operator()(int64_t i) const {
    const float g = gate[i], u = up[i], d = dy[i];
    const float den = 1.0f + expf(-g);
    const float s = 1.0f / den;
    dgate[i] = d * u * (s * (1.0f + g * (1.0f - s)));
    dup[i] = d * (g / den);
  }
};

// One thread per element (grid-stride).
template <typename F> __global__ void pointwise_kernel(int64_t n, F f) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    f(i);
}

template <typename F> void launch(const char *name, int64_t n, F f) {
  if (n <= 0)
    return;
  pointwise_kernel<<<detail::elementwise_blocks(n), detail::kThreads, 0, compute_stream()>>>(n, f);
  detail::check_launch(name);
}

} // namespace

void gelu_tanh_forward(float *y, const float *x, int64_t n) { launch("gelu_tanh_forward", n, GeluTanhForward{y, x}); }

void gelu_tanh_backward(float *dx, const float *dy, const float *x, int64_t n) {
  launch("gelu_tanh_backward", n, GeluTanhBackward{dx, dy, x});
}

void gelu_erf_forward(float *y, const float *x, int64_t n) { launch("gelu_erf_forward", n, GeluErfForward{y, x}); }

void gelu_erf_backward(float *dx, const float *dy, const float *x, int64_t n) {
  launch("gelu_erf_backward", n, GeluErfBackward{dx, dy, x});
}

void swiglu_forward(float *y, const float *gate, const float *up, int64_t n) {
  launch("swiglu_forward", n, SwigluForward{y, gate, up});
}

void swiglu_backward(float *dgate, float *dup, const float *dy, const float *gate, const float *up, int64_t n) {
  launch("swiglu_backward", n, SwigluBackward{dgate, dup, dy, gate, up});
}

} // namespace megart::cuda
