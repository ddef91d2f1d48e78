// Shared pieces of the CUDA kernel tests: a fixture that skips (saying why) without a usable
// GPU, random inputs, and device arrays to move them there and back.
#pragma once

#include "megart/cuda/device.h"
#include "megart/cuda/kernels.h"
#include "megart/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace megart::cuda::test {

class CudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (!available(&why))
      GTEST_SKIP() << "GPU test skipped: no usable CUDA device (" << why << ")";
  }
};

// n values uniform in [lo, hi) from `seed`: never all zeros, so a kernel that writes nothing
// cannot pass.
inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

inline std::vector<int32_t> random_ids(size_t n, uint64_t seed, int32_t lo, int32_t hi_exclusive) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi_exclusive - 1);
  std::vector<int32_t> v(n);
  for (int32_t &x : v)
    x = dist(gen);
  return v;
}

// A device copy of a host vector (or n zeroed elements); get() downloads it after the stream.
template <typename T> class DeviceArray {
public:
  explicit DeviceArray(const std::vector<T> &host)
      : buffer_(device(), host.size() * sizeof(T), MemoryCategory::Workspace), n_(host.size()) {
    device().copy_from_host(buffer_.data(), host.data(), host.size() * sizeof(T));
  }
  explicit DeviceArray(size_t n)
      : buffer_(device(), n * sizeof(T), MemoryCategory::Workspace), n_(n) {}
  T *data() const { return buffer_.as<T>(); }
  std::vector<T> get() const {
    std::vector<T> host(n_);
    device().copy_to_host(host.data(), buffer_.data(), n_ * sizeof(T));
    return host;
  }

private:
  DeviceBuffer buffer_;
  size_t n_;
};

// x rounded to the nearest value of `p` (ties to even), kept as a float: the CPU's
// round_to_precision, checked there against a double reference for every float.
inline float rounded(float x, Precision p) {
  megart::cpu::round_to_precision(&x, &x, 1, p);
  return x;
}

// n values representable in `p`, magnitudes in [0.1, 1), random signs: never zero, so no
// product vanishes and a kernel that writes nothing cannot pass.
inline std::vector<float> rounded_floats(size_t n, uint64_t seed, Precision p) {
  std::vector<float> v = random_floats(n, seed, 0.1f, 1.0f);
  const std::vector<float> sign = random_floats(n, seed + 1000);
  for (size_t i = 0; i < n; ++i)
    v[i] = rounded(sign[i] < 0 ? -v[i] : v[i], p);
  return v;
}

inline std::vector<float> abs_of(std::vector<float> v) {
  for (float &x : v)
    x = std::abs(x);
  return v;
}

// Root mean square of v (0 when empty): the scale for tolerances of sums that cancel.
inline float rms(const std::vector<float> &v) {
  double s = 0.0;
  for (float x : v)
    s += double(x) * x;
  return v.empty() ? 0.0f : static_cast<float>(std::sqrt(s / double(v.size())));
}

// Every element within atol + rtol * |expected|, with the first mismatches named.
inline void expect_near_all(const std::vector<float> &got, const std::vector<float> &want, float rtol,
                            float atol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i)
    if (!(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]))) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
      ++reported;
    }
}

// ---- GEMM cases (kernels_gemm*_test.cpp) ---------------------------------------------------

// "64x32x16 At B alpha 1.000000 beta 0.000000": a GEMM's shape in failure messages.
inline std::string gemm_name(int64_t m, int64_t n, int64_t k, bool ta, bool tb, float alpha, float beta) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + (ta ? " At" : " A") +
         (tb ? " Bt" : " B") + " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta);
}

// One strided-batched GEMM; a stride of -1 stands for the packed size of that operand.
struct BatchCase {
  int64_t batch, m, n, k;
  bool ta, tb;
  int64_t stride_a, stride_b, stride_c;
  float alpha, beta;

  // The same case with every -1 stride replaced by the packed size.
  BatchCase packed() const {
    BatchCase t = *this;
    if (t.stride_a < 0)
      t.stride_a = m * k;
    if (t.stride_b < 0)
      t.stride_b = k * n;
    if (t.stride_c < 0)
      t.stride_c = m * n;
    return t;
  }
  // "gemm_batched x3 <shape> strides 0/512/256", `shape` naming the GEMM.
  std::string describe(const std::string &shape) const {
    return "gemm_batched x" + std::to_string(batch) + " " + shape + " strides " + std::to_string(stride_a) + "/" +
           std::to_string(stride_b) + "/" + std::to_string(stride_c);
  }
};

// A test that may switch the GEMM precision: puts fp32 back for the other suites (the setting
// is host state only, so this needs no GPU).
class LowpTest : public CudaTest {
protected:
  void TearDown() override { set_gemm_precision(Precision::Fp32); }
};

} // namespace megart::cuda::test
