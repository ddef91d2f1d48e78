// cuBLASLt GEMMs against the CPU's (OpenBLAS) on random inputs.
//
// Tolerance: |got - want| <= 1e-4 (|want| + rms(want)). Both sides are fp32 with fp32
// accumulation (TF32 is off), differing only in summation order: each output sums k products of
// size <= 1, so the difference is a few ulps of the running sum, well under 1e-4 of the typical
// magnitude (the rms term covers outputs that cancel to near zero). TF32 (10-bit mantissa, ~5e-4
// relative error per product) would fail it, so this also checks TF32 is off.
#include "cuda_test_util.h"

#include "megart/error.h"
#include "megart/kernels.h"

#include <cmath>
#include <limits>
#include <string>
#include <tuple>

namespace megart::cuda::test {
namespace {

void expect_matches_cpu(const std::vector<float> &got, const std::vector<float> &want, const std::string &what) {
  expect_near_all(got, want, 1e-4f, 1e-4f * rms(want), what);
}

class CudaGemm : public CudaTest, public ::testing::WithParamInterface<std::tuple<int, int, int>> {};
using CudaGemmCases = CudaTest;

TEST_P(CudaGemm, MatchesCpuForEveryTransposeAndScale) {
  const auto [m, n, k] = GetParam();
  const auto a = random_floats(size_t(m) * k, 1), b = random_floats(size_t(k) * n, 2);
  const DeviceArray<float> da(a), db(b);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const auto &[alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.25f}, std::pair{1.0f, 1.0f}}) {
        auto want = random_floats(size_t(m) * n, 3);
        DeviceArray<float> dc(want);
        megart::cpu::gemm(want.data(), a.data(), b.data(), m, n, k, ta, tb, alpha, beta);
        gemm(dc.data(), da.data(), db.data(), m, n, k, ta, tb, alpha, beta);
        expect_matches_cpu(dc.get(), want, gemm_name(m, n, k, ta, tb, alpha, beta));
      }
}

// Tiny, odd (nothing a multiple of a tile), and large enough for split-k or many tiles.
INSTANTIATE_TEST_SUITE_P(Shapes, CudaGemm,
                         ::testing::Values(std::tuple{1, 1, 1}, std::tuple{7, 5, 3}, std::tuple{33, 17, 65},
                                           std::tuple{128, 96, 64}, std::tuple{65, 129, 300}, std::tuple{3, 2, 4099},
                                           std::tuple{384, 512, 1024}));

TEST_F(CudaGemmCases, BetaZeroNeverReadsC) {
  const int64_t m = 19, n = 23, k = 31;
  const auto a = random_floats(m * k, 4), b = random_floats(k * n, 5);
  std::vector<float> want(m * n);
  megart::cpu::gemm(want.data(), a.data(), b.data(), m, n, k, false, true, 0.75f, 0.0f);
  DeviceArray<float> da(a), db(b), dc(std::vector<float>(m * n, std::numeric_limits<float>::quiet_NaN()));
  gemm(dc.data(), da.data(), db.data(), m, n, k, false, true, 0.75f, 0.0f);
  expect_matches_cpu(dc.get(), want, "gemm beta 0 over NaN");
}

TEST_F(CudaGemmCases, EmptyInnerDimensionScalesC) {
  const int64_t m = 5, n = 7;
  const auto c = random_floats(m * n, 6);
  DeviceArray<float> zeroed(std::vector<float>(m * n, std::numeric_limits<float>::quiet_NaN())), scaled(c);
  gemm(zeroed.data(), nullptr, nullptr, m, n, 0, false, false, 1.0f, 0.0f);
  gemm(scaled.data(), nullptr, nullptr, m, n, 0, true, false, 1.0f, 0.5f);
  std::vector<float> half = c;
  for (float &x : half)
    x *= 0.5f;
  expect_near_all(zeroed.get(), std::vector<float>(m * n, 0.0f), 0.0f, 0.0f, "gemm k 0 beta 0");
  expect_near_all(scaled.get(), half, 0.0f, 0.0f, "gemm k 0 beta 0.5");
}

// Operands at 4-byte (not 16- or 256-byte) aligned addresses, as slices of larger tensors are:
// the heuristic must pick an algorithm that copes.
TEST_F(CudaGemmCases, MisalignedOperands) {
  const int64_t m = 37, n = 41, k = 29;
  const auto a = random_floats(m * k + 1, 7), b = random_floats(k * n + 3, 8);
  auto c = random_floats(m * n + 1, 9);
  DeviceArray<float> da(a), db(b), dc(c);
  megart::cpu::gemm(c.data() + 1, a.data() + 1, b.data() + 3, m, n, k, true, false, 1.0f, 1.0f);
  gemm(dc.data() + 1, da.data() + 1, db.data() + 3, m, n, k, true, false, 1.0f, 1.0f);
  expect_matches_cpu(dc.get(), c, "gemm on misaligned pointers");
}

TEST_F(CudaGemmCases, RepeatsBitForBit) {
  const int64_t m = 256, n = 192, k = 2048;
  DeviceArray<float> da(random_floats(m * k, 10)), db(random_floats(k * n, 11)), c1(m * n), c2(m * n);
  gemm(c1.data(), da.data(), db.data(), m, n, k, false, false);
  gemm(c2.data(), da.data(), db.data(), m, n, k, false, false);
  EXPECT_EQ(c1.get(), c2.get());
}

TEST_F(CudaGemmCases, RejectsSizesPast32Bits) {
  EXPECT_THROW(gemm(nullptr, nullptr, nullptr, int64_t(1) << 31, 1, 1, false, false), megart::Error);
}

// ---- gemm_batched -----------------------------------------------------------------------------

void check_batched(BatchCase packed_or_not, uint64_t seed) {
  const BatchCase t = packed_or_not.packed();
  const int64_t size_a = t.m * t.k, size_b = t.k * t.n, size_c = t.m * t.n;
  const auto a = random_floats((t.batch - 1) * t.stride_a + size_a, seed);
  const auto b = random_floats((t.batch - 1) * t.stride_b + size_b, seed + 1);
  auto want = random_floats((t.batch - 1) * t.stride_c + size_c, seed + 2);
  DeviceArray<float> da(a), db(b), dc(want);
  megart::cpu::gemm_batched(want.data(), a.data(), b.data(), t.batch, t.m, t.n, t.k, t.ta, t.tb, t.stride_a, t.stride_b,
                            t.stride_c, t.alpha, t.beta);
  gemm_batched(dc.data(), da.data(), db.data(), t.batch, t.m, t.n, t.k, t.ta, t.tb, t.stride_a, t.stride_b, t.stride_c,
               t.alpha, t.beta);
  expect_matches_cpu(dc.get(), want, t.describe(gemm_name(t.m, t.n, t.k, t.ta, t.tb, t.alpha, t.beta)));
}

TEST_F(CudaGemmCases, BatchedPackedAndPadded) {
  uint64_t seed = 20;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_batched({4, 13, 9, 21, ta, tb, -1, -1, -1, 1.0f, 0.0f}, seed += 3);
      check_batched({3, 16, 32, 8, ta, tb, -1, -1, -1, 0.5f, -1.25f}, seed += 3);
      // Gaps between the matrices (as in a slice of a larger tensor).
      check_batched({3, 7, 11, 5, ta, tb, 7 * 5 + 3, 5 * 11 + 1, 7 * 11 + 5, 1.0f, 1.0f}, seed += 3);
    }
}

TEST_F(CudaGemmCases, BatchedBroadcastOperand) {
  uint64_t seed = 40;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_batched({5, 12, 10, 14, ta, tb, 0, -1, -1, 1.0f, 0.0f}, seed += 3); // shared A
      check_batched({5, 12, 10, 14, ta, tb, -1, 0, -1, 1.0f, 0.5f}, seed += 3); // shared B
    }
}

// stride_c = 0: every product lands in the one C, in batch order.
TEST_F(CudaGemmCases, BatchedIntoOneC) {
  uint64_t seed = 60;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_batched({6, 17, 9, 23, ta, tb, -1, -1, 0, 1.0f, 1.0f}, seed += 3);  // accumulate
      check_batched({6, 17, 9, 23, ta, tb, -1, -1, 0, 0.5f, 1.0f}, seed += 3);  // scaled accumulate
      check_batched({6, 17, 9, 23, ta, tb, -1, -1, 0, 1.0f, 0.0f}, seed += 3);  // last one wins
      check_batched({4, 17, 9, 23, ta, tb, -1, -1, 0, 1.0f, 0.75f}, seed += 3); // beta applied per step
      check_batched({4, 17, 9, 23, ta, tb, 0, -1, 0, 1.0f, 1.0f}, seed += 3);   // shared A too
    }
  // The weight-gradient shape, large enough for a long sum: sum_i A_i^T B_i.
  check_batched({8, 64, 96, 256, true, false, -1, -1, 0, 1.0f, 1.0f}, 99);
}

TEST_F(CudaGemmCases, BatchedEmptyInnerDimensionScalesEachC) {
  check_batched({3, 4, 5, 0, false, false, 0, 0, -1, 1.0f, 0.5f}, 80);
  check_batched({3, 4, 5, 0, false, false, 0, 0, 0, 1.0f, 0.5f}, 83); // 0.5^3 C
}

TEST_F(CudaGemmCases, BatchedRepeatsBitForBit) {
  const int64_t batch = 8, m = 64, n = 96, k = 256;
  DeviceArray<float> da(random_floats(batch * m * k, 12)), db(random_floats(batch * k * n, 13));
  for (int64_t stride_c : {m * n, int64_t(0)}) {
    DeviceArray<float> c1(batch * m * n), c2(batch * m * n);
    for (auto *c : {&c1, &c2})
      gemm_batched(c->data(), da.data(), db.data(), batch, m, n, k, true, false, m * k, k * n, stride_c, 1.0f, 1.0f);
    EXPECT_EQ(c1.get(), c2.get()) << "stride_c " << stride_c;
  }
}

} // namespace
} // namespace megart::cuda::test
