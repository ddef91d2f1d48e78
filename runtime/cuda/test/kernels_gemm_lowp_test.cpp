// bf16 / fp16 GEMMs (set_gemm_precision) against the CPU's fp32 GEMM run on the same inputs
// already rounded to bf16 / fp16, so that the GPU's own rounding of A and B changes nothing and
// the two differ only in how they add up the products. RoundsToNearestEven checks that rounding.
//
// Tolerance, per element: |got - want| <= (k + 2) 2^-22 (|alpha| sum_l |a_il b_lj| + |beta c_ij|).
// The inputs have 8 (bf16) or 11 (fp16) significant bits, so every product a_il b_lj is exact in
// fp32 (16 or 22 bits <= 24) on both sides; what differs is the order and rounding of the fp32
// additions. Summing k terms errs by at most (k - 1) u sum |terms| (Higham, Accuracy and
// Stability, 4.2), with u = 2^-24 on the CPU (round to nearest) and u <= 2^-23 on tensor cores
// (whose internal additions may truncate); alpha and beta add two roundings. Together:
// (k + 1)(2^-24 + 2^-23) <= (k + 2) 2^-22 of the sum of magnitudes. The bound is loose for large
// k (worst case, not typical), yet a wrong operand, transpose or stride is off by the size of the
// outputs themselves, and the small-k shapes pin alpha and beta to ~1e-6.
#include "cuda_test_util.h"

#include "megart/error.h"
#include "megart/kernels.h"

#include <cmath>
#include <limits>
#include <string>
#include <tuple>

namespace megart::cuda::test {
namespace {

int significant_bits(Precision p) { return p == Precision::Bf16 ? 8 : 11; }

// got against want within the bound above; `magnitude` is |alpha| |A| |B| + |beta| |C|.
void expect_within_sum_bound(const std::vector<float> &got, const std::vector<float> &want,
                             const std::vector<float> &magnitude, int64_t k, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double u = std::ldexp(double(k + 2), -22);
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i)
    if (!(std::abs(double(got[i]) - want[i]) <= u * magnitude[i])) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i] << " (bound "
                    << u * magnitude[i] << ")";
      ++reported;
    }
}

std::string name(Precision p, int64_t m, int64_t n, int64_t k, bool ta, bool tb, float alpha, float beta) {
  return std::string(precision_name(p)) + " " + gemm_name(m, n, k, ta, tb, alpha, beta);
}

class CudaLowpGemm : public LowpTest,
                     public ::testing::WithParamInterface<std::tuple<Precision, std::tuple<int, int, int>>> {};
using CudaLowpGemmCases = LowpTest;

TEST_P(CudaLowpGemm, MatchesCpuOnRoundedInputs) {
  const auto [p, shape] = GetParam();
  const auto [m, n, k] = shape;
  const auto a = rounded_floats(size_t(m) * k, 1, p), b = rounded_floats(size_t(k) * n, 2, p);
  const DeviceArray<float> da(a), db(b);
  set_gemm_precision(p);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const auto &[alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.25f}, std::pair{1.0f, 1.0f}}) {
        const auto c = random_floats(size_t(m) * n, 3); // C stays fp32: not rounded
        std::vector<float> want = c, magnitude = abs_of(c);
        DeviceArray<float> dc(c);
        megart::cpu::gemm(want.data(), a.data(), b.data(), m, n, k, ta, tb, alpha, beta);
        megart::cpu::gemm(magnitude.data(), abs_of(a).data(), abs_of(b).data(), m, n, k, ta, tb, std::abs(alpha),
                          std::abs(beta));
        gemm(dc.data(), da.data(), db.data(), m, n, k, ta, tb, alpha, beta);
        expect_within_sum_bound(dc.get(), want, magnitude, k, name(p, m, n, k, ta, tb, alpha, beta));
      }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaLowpGemm,
                         ::testing::Combine(::testing::Values(Precision::Bf16, Precision::Fp16),
                                            ::testing::Values(std::tuple{1, 1, 1}, std::tuple{7, 5, 3},
                                                              std::tuple{33, 17, 65}, std::tuple{128, 96, 64},
                                                              std::tuple{65, 129, 300}, std::tuple{3, 2, 4099},
                                                              std::tuple{384, 512, 1024})));

// A times the identity is A as the GEMM saw it: rounded to nearest even, exactly (one exact
// product per output plus zeros). Ties are included; an fp32 GEMM would return A unrounded.
TEST_F(CudaLowpGemmCases, RoundsInputsToNearestEven) {
  const int64_t m = 64, k = 16;
  std::vector<float> identity(k * k, 0.0f);
  for (int64_t i = 0; i < k; ++i)
    identity[i * k + i] = 1.0f;
  for (Precision p : {Precision::Bf16, Precision::Fp16}) {
    std::vector<float> a = random_floats(m * k, 4, 0.1f, 4.0f);
    const float half_ulp = std::ldexp(1.0f, -significant_bits(p)); // of 1.0
    a[0] = 1.0f + half_ulp;          // tie between 1 and 1 + ulp: to 1 (even)
    a[1] = 1.0f + 3.0f * half_ulp;   // tie between 1 + ulp and 1 + 2 ulp: to 1 + 2 ulp (even)
    a[2] = -(1.0f + half_ulp);
    a[3] = 1.0f + 1.5f * half_ulp;   // above the tie: up
    std::vector<float> want(a.size());
    for (size_t i = 0; i < a.size(); ++i)
      want[i] = rounded(a[i], p);
    ASSERT_EQ(want[0], 1.0f);
    ASSERT_EQ(want[1], 1.0f + 4.0f * half_ulp);
    DeviceArray<float> da(a), di(identity), dc(m * k);
    set_gemm_precision(p);
    gemm(dc.data(), da.data(), di.data(), m, k, k, false, false);
    const std::vector<float> got = dc.get();
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << precision_name(p) << " element " << i << " from " << a[i];
  }
}

// fp16 tops out at 65504: larger inputs become inf, which the loss scaler is there to catch.
TEST_F(CudaLowpGemmCases, Fp16OverflowIsInf) {
  const int64_t k = 8;
  std::vector<float> a(k * k, 0.5f), identity(k * k, 0.0f);
  for (int64_t i = 0; i < k; ++i)
    identity[i * k + i] = 1.0f;
  a[0] = 1e5f;
  DeviceArray<float> da(a), di(identity), dc(k * k);
  set_gemm_precision(Precision::Fp16);
  gemm(dc.data(), da.data(), di.data(), k, k, k, false, false);
  EXPECT_EQ(dc.get()[0], std::numeric_limits<float>::infinity());
  set_gemm_precision(Precision::Bf16); // bf16 has fp32's range
  gemm(dc.data(), da.data(), di.data(), k, k, k, false, false);
  EXPECT_EQ(dc.get()[0], rounded(1e5f, Precision::Bf16));
}

// Operands at 4-byte aligned addresses: their rounded copies are realigned, the result is not.
TEST_F(CudaLowpGemmCases, MisalignedOperands) {
  const int64_t m = 37, n = 41, k = 29;
  for (Precision p : {Precision::Bf16, Precision::Fp16}) {
    const auto a = rounded_floats(m * k + 1, 7, p), b = rounded_floats(k * n + 3, 8, p);
    const auto c = random_floats(m * n + 1, 9);
    std::vector<float> want = c, magnitude = abs_of(c);
    DeviceArray<float> da(a), db(b), dc(c);
    megart::cpu::gemm(want.data() + 1, a.data() + 1, b.data() + 3, m, n, k, true, false, 1.0f, 1.0f);
    megart::cpu::gemm(magnitude.data() + 1, abs_of(a).data() + 1, abs_of(b).data() + 3, m, n, k, true, false, 1.0f,
                      1.0f);
    set_gemm_precision(p);
    gemm(dc.data() + 1, da.data() + 1, db.data() + 3, m, n, k, true, false, 1.0f, 1.0f);
    expect_within_sum_bound(dc.get(), want, magnitude, k, std::string(precision_name(p)) + " misaligned");
  }
}

TEST_F(CudaLowpGemmCases, RepeatsBitForBit) {
  const int64_t m = 256, n = 192, k = 2048;
  DeviceArray<float> da(random_floats(m * k, 10)), db(random_floats(k * n, 11)), c1(m * n), c2(m * n);
  set_gemm_precision(Precision::Bf16);
  gemm(c1.data(), da.data(), db.data(), m, n, k, false, false);
  gemm(c2.data(), da.data(), db.data(), m, n, k, false, false);
  EXPECT_EQ(c1.get(), c2.get());
}

// ---- gemm_batched -----------------------------------------------------------------------------

void check_batched(Precision p, BatchCase packed_or_not, uint64_t seed) {
  const BatchCase t = packed_or_not.packed();
  const int64_t size_a = t.m * t.k, size_b = t.k * t.n, size_c = t.m * t.n;
  const auto a = rounded_floats((t.batch - 1) * t.stride_a + size_a, seed, p);
  const auto b = rounded_floats((t.batch - 1) * t.stride_b + size_b, seed + 1, p);
  const auto c = random_floats((t.batch - 1) * t.stride_c + size_c, seed + 2);
  std::vector<float> want = c, magnitude = abs_of(c);
  DeviceArray<float> da(a), db(b), dc(c);
  megart::cpu::gemm_batched(want.data(), a.data(), b.data(), t.batch, t.m, t.n, t.k, t.ta, t.tb, t.stride_a, t.stride_b,
                            t.stride_c, t.alpha, t.beta);
  megart::cpu::gemm_batched(magnitude.data(), abs_of(a).data(), abs_of(b).data(), t.batch, t.m, t.n, t.k, t.ta, t.tb,
                            t.stride_a, t.stride_b, t.stride_c, std::abs(t.alpha), std::abs(t.beta));
  set_gemm_precision(p);
  gemm_batched(dc.data(), da.data(), db.data(), t.batch, t.m, t.n, t.k, t.ta, t.tb, t.stride_a, t.stride_b, t.stride_c,
               t.alpha, t.beta);
  // With stride_c = 0 one C sums every product: k x batch terms.
  const int64_t terms = t.stride_c == 0 ? t.k * t.batch : t.k;
  expect_within_sum_bound(dc.get(), want, magnitude, terms,
                          t.describe(name(p, t.m, t.n, t.k, t.ta, t.tb, t.alpha, t.beta)));
}

TEST_F(CudaLowpGemmCases, BatchedPackedPaddedAndBroadcast) {
  uint64_t seed = 20;
  for (Precision p : {Precision::Bf16, Precision::Fp16})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check_batched(p, {4, 13, 9, 21, ta, tb, -1, -1, -1, 1.0f, 0.0f}, seed += 3);
        check_batched(p, {3, 16, 32, 8, ta, tb, -1, -1, -1, 0.5f, -1.25f}, seed += 3);
        // Gaps between the matrices (as in a slice of a larger tensor).
        check_batched(p, {3, 7, 11, 5, ta, tb, 7 * 5 + 3, 5 * 11 + 1, 7 * 11 + 5, 1.0f, 1.0f}, seed += 3);
        check_batched(p, {5, 12, 10, 14, ta, tb, 0, -1, -1, 1.0f, 0.0f}, seed += 3); // shared A
        check_batched(p, {5, 12, 10, 14, ta, tb, -1, 0, -1, 1.0f, 0.5f}, seed += 3); // shared B
      }
}

// stride_c = 0: every product lands in the one C, in batch order.
TEST_F(CudaLowpGemmCases, BatchedIntoOneC) {
  uint64_t seed = 60;
  for (Precision p : {Precision::Bf16, Precision::Fp16}) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check_batched(p, {6, 17, 9, 23, ta, tb, -1, -1, 0, 1.0f, 1.0f}, seed += 3);  // accumulate
        check_batched(p, {6, 17, 9, 23, ta, tb, -1, -1, 0, 1.0f, 0.0f}, seed += 3);  // last one wins
        check_batched(p, {4, 17, 9, 23, ta, tb, -1, -1, 0, 1.0f, 0.75f}, seed += 3); // beta applied per step
      }
    // The weight-gradient shape (one GEMM over batch x k).
    check_batched(p, {8, 64, 96, 256, true, false, -1, -1, 0, 1.0f, 1.0f}, 99);
  }
}

// The CUDA Device sets the GEMMs' precision, and its MFU peak becomes the tensor cores'.
TEST_F(CudaLowpGemmCases, DevicePrecisionSetsGemmsAndPeak) {
  Device &d = device();
  d.set_compute_precision(Precision::Fp32);
  const double fp32 = d.peak_tflops();
  d.set_compute_precision(Precision::Bf16);
  EXPECT_EQ(gemm_precision(), Precision::Bf16);
  const double bf16 = d.peak_tflops();
  d.set_compute_precision(Precision::Fp16);
  EXPECT_EQ(gemm_precision(), Precision::Fp16);
  EXPECT_EQ(d.peak_tflops(), bf16);
  d.set_compute_precision(Precision::Fp32);
  EXPECT_EQ(gemm_precision(), Precision::Fp32);
  int index = 0;
  cudaDeviceProp props{};
  ASSERT_EQ(cudaGetDevice(&index), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceProperties(&props, index), cudaSuccess);
  const int sm = props.major * 10 + props.minor;
  // Tensor cores per SM and clock over the FP32 cores': 2048 / (2 x 64) on sm_80, 4096 / (2 x 128) on sm_90.
  if (sm == 80 || sm == 90)
    EXPECT_DOUBLE_EQ(bf16, 16 * fp32);
  else
    EXPECT_EQ(bf16, 0.0);
}

} // namespace
} // namespace megart::cuda::test
