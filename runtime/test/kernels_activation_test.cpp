#include "kernels_test_util.h"
#include "megart/kernels.h"

#include <cmath>
#include <string>

namespace {

using namespace megart::test;
namespace cpu = megart::cpu;

DVec ref_gelu_tanh(const DVec& x) {
  DVec y(x.size());
  const double c = std::sqrt(2.0 / M_PI);
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = 0.5 * x[i] * (1.0 + std::tanh(c * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
  return y;
}

DVec ref_gelu_erf(const DVec& x) {
  DVec y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
  return y;
}

DVec ref_swiglu(const DVec& gate, const DVec& up) {
  DVec y(gate.size());
  for (size_t i = 0; i < gate.size(); ++i)
    y[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
  return y;
}

// Odd sizes, and one above the kernels' parallel threshold (2^14).
const int64_t kSizes[] = {1, 7, 1000, 20001};

// Backward tolerance: each derivative is a handful of float operations on values of size ~1,
// so errors are a few units of 6e-8 relative to the gradient's scale; 1e-5 against the
// rms-floored reference leaves room without hiding formula errors (those are >= 1e-3).
constexpr double kRtol = 1e-5;

TEST(KernelsActivation, GeluTanh) {
  for (int64_t n : kSizes) {
    const Vec x = random_vec(n, 1, -6.0f, 6.0f), dy = random_vec(n, 2);
    Vec y(n), dx(n);
    cpu::gelu_tanh_forward(y.data(), x.data(), n);
    expect_close(y, ref_gelu_tanh(to_double(x)), kRtol, "gelu_tanh n=" + std::to_string(n));
    cpu::gelu_tanh_backward(dx.data(), dy.data(), x.data(), n);
    // Elementwise: the finite-difference loop over all n inputs is cheap for small n only.
    if (n <= 1000)
      expect_close(dx, fd_grad(ref_gelu_tanh, to_double(x), to_double(dy)), kRtol,
                   "gelu_tanh dx n=" + std::to_string(n));
  }
}

TEST(KernelsActivation, GeluErf) {
  for (int64_t n : kSizes) {
    const Vec x = random_vec(n, 3, -6.0f, 6.0f), dy = random_vec(n, 4);
    Vec y(n), dx(n);
    cpu::gelu_erf_forward(y.data(), x.data(), n);
    expect_close(y, ref_gelu_erf(to_double(x)), kRtol, "gelu_erf n=" + std::to_string(n));
    cpu::gelu_erf_backward(dx.data(), dy.data(), x.data(), n);
    if (n <= 1000)
      expect_close(dx, fd_grad(ref_gelu_erf, to_double(x), to_double(dy)), kRtol,
                   "gelu_erf dx n=" + std::to_string(n));
  }
}

TEST(KernelsActivation, SwiGlu) {
  for (int64_t n : kSizes) {
    const Vec gate = random_vec(n, 5, -8.0f, 8.0f), up = random_vec(n, 6, -2.0f, 2.0f),
              dy = random_vec(n, 7);
    Vec y(n), dgate(n), dup(n);
    cpu::swiglu_forward(y.data(), gate.data(), up.data(), n);
    const DVec gd = to_double(gate), ud = to_double(up), dyd = to_double(dy);
    expect_close(y, ref_swiglu(gd, ud), kRtol, "swiglu n=" + std::to_string(n));
    cpu::swiglu_backward(dgate.data(), dup.data(), dy.data(), gate.data(), up.data(), n);
    if (n <= 1000) {
      expect_close(dgate, fd_grad([&](const DVec& g) { return ref_swiglu(g, ud); }, gd, dyd),
                   kRtol, "swiglu dgate n=" + std::to_string(n));
      expect_close(dup, fd_grad([&](const DVec& u) { return ref_swiglu(gd, u); }, ud, dyd), kRtol,
                   "swiglu dup n=" + std::to_string(n));
    }
  }
}

TEST(KernelsActivation, ExtremeInputsStayFinite) {
  const Vec x = {-1000.0f, -100.0f, -0.0f, 0.0f, 100.0f, 1000.0f};
  const int64_t n = x.size();
  const Vec one(n, 1.0f);
  Vec a(n), b(n);
  // The float overloads (the names also have 16-bit templates).
  using Forward = void (*)(float*, const float*, int64_t);
  using Backward = void (*)(float*, const float*, const float*, int64_t);
  for (Forward fwd : std::initializer_list<Forward>{cpu::gelu_tanh_forward, cpu::gelu_erf_forward}) {
    fwd(a.data(), x.data(), n);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(a[i], x[i] > 0 ? x[i] : 0.0f) << "x = " << x[i];
  }
  for (Backward bwd : std::initializer_list<Backward>{cpu::gelu_tanh_backward, cpu::gelu_erf_backward}) {
    bwd(a.data(), one.data(), x.data(), n);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_TRUE(std::isfinite(a[i])) << "x = " << x[i];
  }
  cpu::swiglu_forward(a.data(), x.data(), one.data(), n);
  cpu::swiglu_backward(a.data(), b.data(), one.data(), x.data(), one.data(), n);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_TRUE(std::isfinite(a[i]) && std::isfinite(b[i])) << "gate = " << x[i];
}

TEST(KernelsActivation, InPlace) {
  const int64_t n = 33;
  const Vec x = random_vec(n, 8, -3.0f, 3.0f);
  Vec want(n), y = x;
  cpu::gelu_tanh_forward(want.data(), x.data(), n);
  cpu::gelu_tanh_forward(y.data(), y.data(), n);
  EXPECT_EQ(y, want);
}

} // namespace
