// Pointwise activations (GELU tanh / erf, SwiGLU). Float math with libm functions, matching the
// formulas PyTorch evaluates in float32. Outputs may alias inputs (each element is read before
// it is written, by the same iteration).
//
// Built with IEEE arithmetic (no -ffast-math, see CMakeLists.txt): an inf in an intermediate
// (exp overflowing) must give the limit, and -ffast-math's reciprocal approximation turns
// g / inf into inf * 0 = NaN. Whether a result is finite does not depend on the CPU; its last
// bits may (an FMA contraction, or glibc's vector math for SSE, AVX2 or AVX-512, can round an ulp
// apart), which is why the tests compare to tolerances.
//
// The GELU expressions are parenthesised in the order the earlier -ffast-math build evaluated
// them (x^2 (c x), v (0.5 (1 + t))), so GELU results, and the demo's losses, stayed bit for bit
// what they were on CPUs with FMA. SwiGLU's could not: that build's division was the bug.
//
// Templates over the storage type (kernels.h): each element widened on load, rounded on store.
#include "megart/kernels.h"

#include <algorithm>
#include <cmath>

// glibc's vector expf / tanhf / erff (libmvec, x86-64) let GCC vectorize these loops, about 10x
// faster than the scalar calls. glibc declares them only under -ffast-math; declared here they
// need just -fno-math-errno. They are accurate to a few ulp and handle inf and overflow like the
// scalar functions. tanhf and erff came with glibc 2.35; elsewhere the loops call libm.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) &&   \
    !defined(__FAST_MATH__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
extern "C" {
#pragma omp declare simd notinbranch
float expf(float) noexcept;
#pragma omp declare simd notinbranch
float tanhf(float) noexcept;
#pragma omp declare simd notinbranch
float erff(float) noexcept;
}
#endif

namespace megart::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 14;
constexpr float kSqrt2OverPi = 0.7978845608028654f; // sqrt(2/pi)
constexpr float kGeluCoef = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;   // 1/sqrt(2)
constexpr float kInvSqrt2Pi = 0.3989422804014327f; // 1/sqrt(2 pi)
// Beyond |x| = 10, tanh(sqrt(2/pi) (x + 0.044715 x^3)) is +-1 in float, so the tanh GELU's
// derivative is exactly 1 or 0 and x can be clamped here without changing it; unclamped, x^2
// overflows past 1.8e19 and 0 * inf gives NaN.
constexpr float kGeluTanhSaturated = 10.0f;

} // namespace

template <typename A> void gelu_tanh_forward(A* y, const A* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float v = to_float(x[i]);
    const float t = std::tanh(kSqrt2OverPi * (v + (v * v) * (kGeluCoef * v)));
    y[i] = from_float<A>(v * (0.5f * (1.0f + t)));
  }
}

template <typename A> void gelu_tanh_backward(A* dx, const A* dy, const A* x, int64_t n) {
  // d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 c x^2),  t = tanh(u).
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::clamp(to_float(x[i]), -kGeluTanhSaturated, kGeluTanhSaturated);
    const float v2 = v * v;
    const float t = std::tanh(kSqrt2OverPi * (v + v2 * (kGeluCoef * v)));
    const float dtanh = (1.0f + 3.0f * kGeluCoef * v2) * (1.0f - t * t);
    dx[i] = from_float<A>((0.5f * to_float(dy[i])) * ((1.0f + t) + (kSqrt2OverPi * v) * dtanh));
  }
}

template <typename A> void gelu_erf_forward(A* y, const A* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float v = to_float(x[i]);
    y[i] = from_float<A>(v * (0.5f * (1.0f + std::erf(v * kInvSqrt2))));
  }
}

template <typename A> void gelu_erf_backward(A* dx, const A* dy, const A* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float v = to_float(x[i]);
    const float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
    dx[i] = from_float<A>(to_float(dy[i]) * (cdf + v * pdf));
  }
}

template <typename A> void swiglu_forward(A* y, const A* gate, const A* up, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float g = to_float(gate[i]);
    // As torch's silu: g / (1 + exp(-g)). exp(-g) overflows to inf for g < -88 and the
    // quotient becomes -0, which is the limit (an IEEE division; see the top of the file).
    y[i] = from_float<A>(g / (1.0f + std::exp(-g)) * to_float(up[i]));
  }
}

template <typename A>
void swiglu_backward(A* dgate, A* dup, const A* dy, const A* gate, const A* up, int64_t n) {
  // silu'(g) = s (1 + g (1 - s)),  s = sigmoid(g).
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float g = to_float(gate[i]), u = to_float(up[i]), d = to_float(dy[i]);
    const float den = 1.0f + std::exp(-g);
    const float s = 1.0f / den;
    dgate[i] = from_float<A>(d * u * (s * (1.0f + g * (1.0f - s))));
    dup[i] = from_float<A>(d * (g / den));
  }
}

void gelu_tanh_forward(float* y, const float* x, int64_t n) { gelu_tanh_forward<float>(y, x, n); }
void gelu_tanh_backward(float* dx, const float* dy, const float* x, int64_t n) {
  gelu_tanh_backward<float>(dx, dy, x, n);
}
void gelu_erf_forward(float* y, const float* x, int64_t n) { gelu_erf_forward<float>(y, x, n); }
void gelu_erf_backward(float* dx, const float* dy, const float* x, int64_t n) {
  gelu_erf_backward<float>(dx, dy, x, n);
}
void swiglu_forward(float* y, const float* gate, const float* up, int64_t n) {
  swiglu_forward<float>(y, gate, up, n);
}
void swiglu_backward(float* dgate, float* dup, const float* dy, const float* gate, const float* up,
                     int64_t n) {
  swiglu_backward<float>(dgate, dup, dy, gate, up, n);
}

#define MEGART_ACTIVATIONS(A)                                                                      \
  template void gelu_tanh_forward<A>(A*, const A*, int64_t);                                       \
  template void gelu_tanh_backward<A>(A*, const A*, const A*, int64_t);                            \
  template void gelu_erf_forward<A>(A*, const A*, int64_t);                                        \
  template void gelu_erf_backward<A>(A*, const A*, const A*, int64_t);                             \
  template void swiglu_forward<A>(A*, const A*, const A*, int64_t);                                \
  template void swiglu_backward<A>(A*, A*, const A*, const A*, const A*, int64_t);
MEGART_ACTIVATIONS(bf16_t)
MEGART_ACTIVATIONS(fp16_t)

} // namespace megart::cpu
