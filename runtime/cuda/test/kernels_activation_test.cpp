// GELU (tanh, erf) and SwiGLU against the CPU kernels, out of place and in place.
//
// Tolerance: 1e-5 relative + 2e-6 absolute. Both sides evaluate the same float formula but with
// different tanhf / erff / expf (CUDA's accurate versions, within 2 ulp; the CPU build's
// vectorised glibc versions, within about 4 ulp) and possibly different FMA contraction. The
// worst case is an error of ~6 ulp of 1 (4e-7) in tanh / erf times factors up to ~5 (0.5 x for
// |x| < 5, or the derivative's chain terms): about 2e-6 absolute. A wrong formula or constant
// is off by 1e-3 or more.
#include "cuda_test_util.h"

#include "megart/kernels.h"

#include <string>

namespace megart::cuda::test {
namespace {

using CudaActivation = CudaTest;

constexpr float kRtol = 1e-5f, kAtol = 2e-6f;
// Sizes around the block size (256) and one large enough for a multi-block grid.
const int64_t kSizes[] = {1, 255, 257, 10007};

using Unary = void (*)(float *, const float *, int64_t);
using Binary = void (*)(float *, const float *, const float *, int64_t);

// y = f(x) on x in [-5, 5): both tails and the curved middle.
void check_forward(const char *name, Unary gpu, Unary cpu) {
  for (int64_t n : kSizes) {
    const auto x = random_floats(n, 21, -5.0f, 5.0f);
    std::vector<float> want(n);
    cpu(want.data(), x.data(), n);
    const DeviceArray<float> dx(x);
    DeviceArray<float> y(n);
    gpu(y.data(), dx.data(), n);
    expect_near_all(y.get(), want, kRtol, kAtol, std::string(name) + " n=" + std::to_string(n));
    DeviceArray<float> in_place(x);
    gpu(in_place.data(), in_place.data(), n);
    expect_near_all(in_place.get(), want, kRtol, kAtol, std::string(name) + " in place n=" + std::to_string(n));
  }
}

// dx = f'(x) dy; in place writes dx over dy.
void check_backward(const char *name, Binary gpu, Binary cpu) {
  for (int64_t n : kSizes) {
    const auto x = random_floats(n, 22, -5.0f, 5.0f), dy = random_floats(n, 23);
    std::vector<float> want(n);
    cpu(want.data(), dy.data(), x.data(), n);
    const DeviceArray<float> dx_in(x), ddy(dy);
    DeviceArray<float> dx(n);
    gpu(dx.data(), ddy.data(), dx_in.data(), n);
    expect_near_all(dx.get(), want, kRtol, kAtol, std::string(name) + " n=" + std::to_string(n));
    DeviceArray<float> in_place(dy);
    gpu(in_place.data(), in_place.data(), dx_in.data(), n);
    expect_near_all(in_place.get(), want, kRtol, kAtol, std::string(name) + " in place n=" + std::to_string(n));
  }
}

TEST_F(CudaActivation, GeluTanh) {
  check_forward("gelu_tanh_forward", gelu_tanh_forward, megart::cpu::gelu_tanh_forward);
  check_backward("gelu_tanh_backward", gelu_tanh_backward, megart::cpu::gelu_tanh_backward);
}

TEST_F(CudaActivation, GeluErf) {
  check_forward("gelu_erf_forward", gelu_erf_forward, megart::cpu::gelu_erf_forward);
  check_backward("gelu_erf_backward", gelu_erf_backward, megart::cpu::gelu_erf_backward);
}

TEST_F(CudaActivation, SwigluForward) {
  for (int64_t n : kSizes) {
    const auto gate = random_floats(n, 24, -6.0f, 6.0f), up = random_floats(n, 25);
    std::vector<float> want(n);
    megart::cpu::swiglu_forward(want.data(), gate.data(), up.data(), n);
    const DeviceArray<float> dup(up);
    DeviceArray<float> dgate(gate), y(n);
    swiglu_forward(y.data(), dgate.data(), dup.data(), n);
    expect_near_all(y.get(), want, kRtol, kAtol, "swiglu_forward n=" + std::to_string(n));
    swiglu_forward(dgate.data(), dgate.data(), dup.data(), n); // over the gate
    expect_near_all(dgate.get(), want, kRtol, kAtol, "swiglu_forward in place n=" + std::to_string(n));
  }
}

TEST_F(CudaActivation, SwigluBackward) {
  for (int64_t n : kSizes) {
    const auto gate = random_floats(n, 26, -6.0f, 6.0f), up = random_floats(n, 27), dy = random_floats(n, 28);
    std::vector<float> want_dgate(n), want_dup(n);
    megart::cpu::swiglu_backward(want_dgate.data(), want_dup.data(), dy.data(), gate.data(), up.data(), n);
    const std::string size = " n=" + std::to_string(n);

    const DeviceArray<float> ddy(dy);
    DeviceArray<float> dgate_in(gate), dup_in(up), dgate(n), dup(n);
    swiglu_backward(dgate.data(), dup.data(), ddy.data(), dgate_in.data(), dup_in.data(), n);
    expect_near_all(dgate.get(), want_dgate, kRtol, kAtol, "swiglu_backward dgate" + size);
    expect_near_all(dup.get(), want_dup, kRtol, kAtol, "swiglu_backward dup" + size);

    // In place: the gradients overwrite the inputs they belong to.
    swiglu_backward(dgate_in.data(), dup_in.data(), ddy.data(), dgate_in.data(), dup_in.data(), n);
    expect_near_all(dgate_in.get(), want_dgate, kRtol, kAtol, "swiglu_backward dgate in place" + size);
    expect_near_all(dup_in.get(), want_dup, kRtol, kAtol, "swiglu_backward dup in place" + size);
  }
}

} // namespace
} // namespace megart::cuda::test
