// gemm_bias / gemm_bias_gelu (cuBLASLt's BIAS epilogue, then our GELU kernels) against the CPU's
// unfused program: megart::cpu::gemm, megart::cpu::add, megart::cpu::gelu_*_forward.
//
// Tolerances.
//  - pre (fp32): |got - want| <= 1e-4 (|want| + rms(want)), as the gemm tests. The product
//    differs only in summation order (a few ulps of the running sums); the bias adds one fp32
//    rounding on each side (2^-24 relative), far inside the bound.
//  - out = gelu(pre): |gelu'| <= 1.13 everywhere (the erf form peaks at 1.1289 at x = sqrt 2, the
//    tanh form at 1.1290), so pre's error carries over at most 1.13 times: 1.13e-4 (|pre| +
//    rms(pre)). The GELUs themselves differ by the activation tests' 1e-5 |out| + 2e-6 (CUDA's
//    vs glibc's tanhf / erff), and |out| <= |pre|. Bound: 1.25e-4 (|pre| + rms(pre)) + 2e-6.
//    cuBLASLt's GELU epilogue is not used (cublasLt.h does not say whether it is erf, the tanh
//    approximation or a faster one; a different approximation of tanh would differ by up to its
//    own error, e.g. ~1e-3 for tanh.approx.f32's 2^-11 relative, which would need its own bound):
//    out must be exactly our gelu kernel applied to pre, which the tests check bit for bit.
//  - bf16 / fp16 inputs: the low-precision gemm tests' bound, (k + 2) 2^-22 (sum_l |a_il b_lj| +
//    |bias_j|), on inputs already representable in that precision. Each product is exact on both
//    sides; the CPU rounds k - 1 additions plus the bias add at 2^-24, tensor cores k - 1
//    additions at up to 2^-23 plus the epilogue's bias add at 2^-24: together under
//    (k + 1)(2^-24 + 2^-23) of the sum of magnitudes. The bias stays fp32 (never rounded).
#include "cuda_test_util.h"

#include "megart/kernels.h"

#include <cmath>
#include <string>
#include <tuple>

namespace megart::cuda::test {
namespace {

// Every element within its own bound, with the first mismatches named.
void expect_within(const std::vector<float> &got, const std::vector<float> &want, const std::vector<double> &bound,
                   const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(bound.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i)
    if (!(std::abs(double(got[i]) - want[i]) <= bound[i])) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i] << " (bound " << bound[i]
                    << ")";
      ++reported;
    }
}

// The unfused CPU program: pre = A op(B) + bias.
std::vector<float> cpu_pre(const std::vector<float> &a, const std::vector<float> &b, const std::vector<float> &bias,
                           int64_t m, int64_t n, int64_t k, bool tb) {
  std::vector<float> pre(size_t(m) * n);
  megart::cpu::gemm(pre.data(), a.data(), b.data(), m, n, k, false, tb);
  megart::cpu::add(pre.data(), pre.data(), bias.data(), m, n);
  return pre;
}

std::vector<float> cpu_gelu(const std::vector<float> &pre, bool tanh) {
  std::vector<float> out(pre.size());
  if (tanh)
    megart::cpu::gelu_tanh_forward(out.data(), pre.data(), int64_t(pre.size()));
  else
    megart::cpu::gelu_erf_forward(out.data(), pre.data(), int64_t(pre.size()));
  return out;
}

// GELU's output bound for fp32 (see the top).
std::vector<double> gelu_bound(const std::vector<float> &pre) {
  const double r = rms(pre);
  std::vector<double> bound(pre.size());
  for (size_t i = 0; i < pre.size(); ++i)
    bound[i] = 1.25e-4 * (std::abs(double(pre[i])) + r) + 2e-6;
  return bound;
}

void expect_pre_matches_cpu(const std::vector<float> &got, const std::vector<float> &want, const std::string &what) {
  expect_near_all(got, want, 1e-4f, 1e-4f * rms(want), what);
}

std::string name(int64_t m, int64_t n, int64_t k, bool tb) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + (tb ? " Bt" : " B");
}

class CudaGemmEpilogue : public CudaTest, public ::testing::WithParamInterface<std::tuple<int, int, int>> {};
using CudaGemmEpilogueCases = CudaTest;

TEST_P(CudaGemmEpilogue, BiasMatchesCpu) {
  const auto [m, n, k] = GetParam();
  const auto a = random_floats(size_t(m) * k, 1), bias = random_floats(size_t(n), 3);
  const DeviceArray<float> da(a), dbias(bias);
  for (bool tb : {false, true}) {
    const auto b = random_floats(size_t(k) * n, tb ? 4 : 2); // [k, n] or [n, k]: same count
    const DeviceArray<float> db(b);
    DeviceArray<float> dout(random_floats(size_t(m) * n, 5)); // garbage that must be overwritten
    gemm_bias(dout.data(), da.data(), db.data(), dbias.data(), m, n, k, tb);
    expect_pre_matches_cpu(dout.get(), cpu_pre(a, b, bias, m, n, k, tb), "gemm_bias " + name(m, n, k, tb));
  }
}

TEST_P(CudaGemmEpilogue, BiasGeluMatchesCpu) {
  const auto [m, n, k] = GetParam();
  const auto a = random_floats(size_t(m) * k, 11), bias = random_floats(size_t(n), 13);
  const DeviceArray<float> da(a), dbias(bias);
  for (bool tb : {false, true}) {
    const auto b = random_floats(size_t(k) * n, tb ? 14 : 12);
    const DeviceArray<float> db(b);
    const auto want_pre = cpu_pre(a, b, bias, m, n, k, tb);
    for (bool tanh : {true, false}) {
      const std::string what = std::string("gemm_bias_gelu ") + (tanh ? "tanh " : "erf ") + name(m, n, k, tb);
      DeviceArray<float> dpre(random_floats(size_t(m) * n, 15)), dout(random_floats(size_t(m) * n, 16));
      gemm_bias_gelu(dpre.data(), dout.data(), da.data(), db.data(), dbias.data(), m, n, k, tb, tanh);
      const auto got_pre = dpre.get(), got_out = dout.get();
      expect_pre_matches_cpu(got_pre, want_pre, what + " pre");
      expect_within(got_out, cpu_gelu(want_pre, tanh), gelu_bound(want_pre), what + " out");

      // pre is gemm_bias's result and out our GELU kernel on it, bit for bit.
      DeviceArray<float> alone(size_t(m) * n), gelu_of_pre(size_t(m) * n);
      gemm_bias(alone.data(), da.data(), db.data(), dbias.data(), m, n, k, tb);
      if (tanh)
        gelu_tanh_forward(gelu_of_pre.data(), dpre.data(), int64_t(m) * n);
      else
        gelu_erf_forward(gelu_of_pre.data(), dpre.data(), int64_t(m) * n);
      EXPECT_EQ(got_pre, alone.get()) << what;
      EXPECT_EQ(got_out, gelu_of_pre.get()) << what;
    }
  }
}

// A single row with odd sizes (nothing a multiple of a tile or of 16 bytes: likely the unfused
// fallback), odd sizes on several tiles, and a tile-friendly shape (the epilogue proper).
INSTANTIATE_TEST_SUITE_P(Shapes, CudaGemmEpilogue,
                         ::testing::Values(std::tuple{1, 3, 7}, std::tuple{33, 65, 17}, std::tuple{128, 256, 64}));

// k == 0: the product is empty, so pre is the bias on every row.
TEST_F(CudaGemmEpilogueCases, EmptyInnerDimensionGivesBias) {
  const int64_t m = 5, n = 7;
  const auto bias = random_floats(n, 20);
  std::vector<float> rows;
  for (int64_t i = 0; i < m; ++i)
    rows.insert(rows.end(), bias.begin(), bias.end());
  DeviceArray<float> dbias(bias), dpre(random_floats(m * n, 21)), dout(random_floats(m * n, 22));
  for (bool tanh : {true, false}) {
    gemm_bias_gelu(dpre.data(), dout.data(), nullptr, nullptr, dbias.data(), m, n, 0, false, tanh);
    expect_near_all(dpre.get(), rows, 0.0f, 0.0f, "gemm_bias_gelu k 0 pre");
    expect_near_all(dout.get(), cpu_gelu(rows, tanh), 1e-5f, 2e-6f, "gemm_bias_gelu k 0 out");
  }
}

// Operands, bias and output at 4-byte (not 16- or 256-byte) aligned addresses, as slices of
// larger tensors are: the plan is keyed by the bias's alignment too.
TEST_F(CudaGemmEpilogueCases, MisalignedOperandsAndBias) {
  const int64_t m = 64, n = 96, k = 32;
  const auto a = random_floats(m * k + 1, 30), b = random_floats(k * n + 3, 31), bias = random_floats(n + 1, 32);
  DeviceArray<float> da(a), db(b), dbias(bias), dout(random_floats(m * n + 1, 33));
  const std::vector<float> a1(a.begin() + 1, a.end()), b3(b.begin() + 3, b.end()), bias1(bias.begin() + 1, bias.end());
  for (bool tb : {false, true}) {
    gemm_bias(dout.data() + 1, da.data() + 1, db.data() + 3, dbias.data() + 1, m, n, k, tb);
    const auto got = dout.get();
    expect_pre_matches_cpu(std::vector<float>(got.begin() + 1, got.end()), cpu_pre(a1, b3, bias1, m, n, k, tb),
                           "gemm_bias misaligned " + name(m, n, k, tb));
  }
  // The same shape again with aligned pointers: another plan, the same values.
  DeviceArray<float> aligned_a(a1), aligned_b(b3), aligned_bias(bias1), aligned_out(m * n);
  gemm_bias(aligned_out.data(), aligned_a.data(), aligned_b.data(), aligned_bias.data(), m, n, k, false);
  expect_pre_matches_cpu(aligned_out.get(), cpu_pre(a1, b3, bias1, m, n, k, false), "gemm_bias aligned after misaligned");
}

// Two biases through the same cached plan: the bias pointer is the call's, not the plan's first.
TEST_F(CudaGemmEpilogueCases, EachCallUsesItsOwnBias) {
  const int64_t m = 32, n = 64, k = 16;
  const auto a = random_floats(m * k, 40), b = random_floats(k * n, 41);
  const auto bias1 = random_floats(n, 42), bias2 = random_floats(n, 43);
  DeviceArray<float> da(a), db(b), dbias1(bias1), dbias2(bias2), out1(m * n), out2(m * n);
  gemm_bias(out1.data(), da.data(), db.data(), dbias1.data(), m, n, k, false);
  gemm_bias(out2.data(), da.data(), db.data(), dbias2.data(), m, n, k, false);
  expect_pre_matches_cpu(out1.get(), cpu_pre(a, b, bias1, m, n, k, false), "gemm_bias first bias");
  expect_pre_matches_cpu(out2.get(), cpu_pre(a, b, bias2, m, n, k, false), "gemm_bias second bias");
}

// ---- bf16 / fp16 inputs ---------------------------------------------------------------------

class CudaLowpGemmEpilogue : public LowpTest,
                             public ::testing::WithParamInterface<std::tuple<Precision, std::tuple<int, int, int>>> {};

TEST_P(CudaLowpGemmEpilogue, MatchesCpuOnRoundedInputs) {
  const auto [p, shape] = GetParam();
  const auto [m, n, k] = shape;
  const auto a = rounded_floats(size_t(m) * k, 50, p), bias = random_floats(size_t(n), 52); // bias: fp32
  const DeviceArray<float> da(a), dbias(bias);
  set_gemm_precision(p);
  for (bool tb : {false, true}) {
    const auto b = rounded_floats(size_t(k) * n, tb ? 53 : 51, p);
    const DeviceArray<float> db(b);
    const auto want_pre = cpu_pre(a, b, bias, m, n, k, tb);
    // Sum of magnitudes |A| |B| + |bias|, and the bounds on pre and on gelu(pre).
    const auto magnitude = cpu_pre(abs_of(a), abs_of(b), abs_of(bias), m, n, k, tb);
    const double u = std::ldexp(double(k + 2), -22);
    std::vector<double> pre_bound(magnitude.size()), out_bound(magnitude.size());
    for (size_t i = 0; i < magnitude.size(); ++i) {
      pre_bound[i] = u * magnitude[i];
      out_bound[i] = 1.13 * pre_bound[i] + 1e-5 * std::abs(want_pre[i]) + 2e-6;
    }
    const std::string what = std::string(precision_name(p)) + " " + name(m, n, k, tb);
    DeviceArray<float> dbias_only(size_t(m) * n);
    gemm_bias(dbias_only.data(), da.data(), db.data(), dbias.data(), m, n, k, tb);
    expect_within(dbias_only.get(), want_pre, pre_bound, "gemm_bias " + what);
    for (bool tanh : {true, false}) {
      DeviceArray<float> dpre(size_t(m) * n), dout(size_t(m) * n);
      gemm_bias_gelu(dpre.data(), dout.data(), da.data(), db.data(), dbias.data(), m, n, k, tb, tanh);
      expect_within(dpre.get(), want_pre, pre_bound, std::string("gemm_bias_gelu pre ") + what);
      expect_within(dout.get(), cpu_gelu(want_pre, tanh), out_bound,
                    std::string("gemm_bias_gelu out ") + (tanh ? "tanh " : "erf ") + what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaLowpGemmEpilogue,
                         ::testing::Combine(::testing::Values(Precision::Bf16, Precision::Fp16),
                                            ::testing::Values(std::tuple{1, 3, 7}, std::tuple{33, 65, 17},
                                                              std::tuple{128, 256, 64})));

} // namespace
} // namespace megart::cuda::test
