#include "kernels_test_util.h"
#include "megart/kernels.h"

#include <cmath>
#include <limits>
#include <tuple>

namespace {

using namespace megart::test;
namespace cpu = megart::cpu;

// Naive double reference of C = alpha op(A) op(B) + beta C, row-major.
DVec ref_gemm(const Vec& a, const Vec& b, const Vec& c, int64_t m, int64_t n, int64_t k, bool ta,
              bool tb, double alpha, double beta) {
  DVec out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a[p * m + i] : a[i * k + p];
        const double bv = tb ? b[j * k + p] : b[p * n + j];
        s += av * bv;
      }
      out[i * n + j] = alpha * s + (beta == 0.0 ? 0.0 : beta * c[i * n + j]);
    }
  return out;
}

class KernelsGemm : public ::testing::TestWithParam<std::tuple<int, int, int, bool, bool>> {};

TEST_P(KernelsGemm, MatchesDoubleReference) {
  const auto [m, n, k, ta, tb] = GetParam();
  const Vec a = random_vec(m * k, 1), b = random_vec(k * n, 2);
  for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.25f}}) {
    Vec c = random_vec(m * n, 3);
    const DVec want = ref_gemm(a, b, c, m, n, k, ta, tb, alpha, beta);
    cpu::gemm(c.data(), a.data(), b.data(), m, n, k, ta, tb, alpha, beta);
    expect_close(c, want, 1e-5, "gemm");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, KernelsGemm,
                         ::testing::Combine(::testing::Values(1, 7, 33), ::testing::Values(1, 5, 64),
                                            ::testing::Values(1, 13, 70), ::testing::Bool(),
                                            ::testing::Bool()));

TEST(KernelsGemmEdge, BetaZeroIgnoresGarbageInC) {
  const int64_t m = 4, n = 3, k = 5;
  const Vec a = random_vec(m * k, 4), b = random_vec(k * n, 5);
  Vec c(m * n, std::numeric_limits<float>::quiet_NaN());
  cpu::gemm(c.data(), a.data(), b.data(), m, n, k, false, false);
  expect_close(c, ref_gemm(a, b, c, m, n, k, false, false, 1.0, 0.0), 1e-5, "gemm");
}

TEST(KernelsGemmEdge, EmptyInnerDimensionScalesC) {
  Vec c = {1.0f, 2.0f, 3.0f, 4.0f};
  cpu::gemm(c.data(), nullptr, nullptr, 2, 2, 0, false, false, 1.0f, 0.5f);
  EXPECT_EQ(c, (Vec{0.5f, 1.0f, 1.5f, 2.0f}));
  Vec nan(4, std::numeric_limits<float>::quiet_NaN());
  cpu::gemm(nan.data(), nullptr, nullptr, 2, 2, 0, false, false);
  EXPECT_EQ(nan, Vec(4, 0.0f));
}

TEST(KernelsGemmBatched, StridesAndBroadcast) {
  const int64_t batch = 3, m = 5, n = 4, k = 6;
  // A per batch, B broadcast (stride 0), transposed B.
  const Vec a = random_vec(batch * m * k, 6), b = random_vec(n * k, 7);
  Vec c = random_vec(batch * m * n, 8);
  DVec want;
  for (int64_t i = 0; i < batch; ++i) {
    const Vec ai(a.begin() + i * m * k, a.begin() + (i + 1) * m * k);
    const Vec ci(c.begin() + i * m * n, c.begin() + (i + 1) * m * n);
    const DVec wi = ref_gemm(ai, b, ci, m, n, k, false, true, 2.0, 1.0);
    want.insert(want.end(), wi.begin(), wi.end());
  }
  cpu::gemm_batched(c.data(), a.data(), b.data(), batch, m, n, k, false, true, m * k, 0, m * n,
                    2.0f, 1.0f);
  expect_close(c, want, 1e-5, "gemm_batched");
}

TEST(KernelsGemmBatched, ZeroOutputStrideAccumulates) {
  // stride_c = 0, beta = 1: C += sum_i A_i B_i (how a weight gradient sums over a batch).
  const int64_t batch = 4, m = 3, n = 5, k = 2;
  const Vec a = random_vec(batch * k * m, 9), b = random_vec(batch * k * n, 10);
  Vec c = random_vec(m * n, 11);
  DVec want(c.begin(), c.end());
  for (int64_t i = 0; i < batch; ++i) {
    const Vec ai(a.begin() + i * k * m, a.begin() + (i + 1) * k * m);
    const Vec bi(b.begin() + i * k * n, b.begin() + (i + 1) * k * n);
    const DVec prod = ref_gemm(ai, bi, c, m, n, k, true, false, 1.0, 0.0);
    for (int64_t e = 0; e < m * n; ++e)
      want[e] += prod[e];
  }
  cpu::gemm_batched(c.data(), a.data(), b.data(), batch, m, n, k, true, false, k * m, k * n, 0,
                    1.0f, 1.0f);
  expect_close(c, want, 1e-5, "gemm_batched accumulate");
}

} // namespace
