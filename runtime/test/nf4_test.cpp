// NF4 (megart/nf4.h) on its own: the layout, the round trip's error bound, the statistics'
// size, the GEMM with an NF4 weight and the bad inputs. test/e2e/nf4_bitsandbytes.py holds the bytes against bitsandbytes.
#include "megart/error.h"
#include "megart/kernels.h"
#include "megart/nf4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

std::vector<float> random_weights(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float &v : x)
    v = normal(rng);
  return x;
}

TEST(Nf4, CodesPackTwoPerByteHighNibbleFirst) {
  // One block: its absmax is 1, so each value is its own code.
  std::vector<float> x = {-1.0f, 1.0f, 0.0f, megart::kNf4Codes[3], megart::kNf4Codes[12], -0.5f};
  const megart::Nf4Tensor t = megart::nf4_quantize(x.data(), 6, 64, false);
  ASSERT_EQ(t.packed.size(), 3u);
  EXPECT_EQ(t.packed[0], 0x0F); // -1 -> code 0 (high nibble), 1 -> code 15
  EXPECT_EQ(t.packed[1], 0x73); // 0 -> 7, codes[3] -> 3
  EXPECT_EQ(t.packed[2], 0xC2); // codes[12] -> 12, -0.5 -> nearest -0.525 (2)
  EXPECT_EQ(t.absmax, std::vector<float>{1.0f});
}

TEST(Nf4, NearestCodeBreaksTiesTowardTheLowerIndex) {
  const float table[] = {0.0f, 0.5f, 1.0f};
  EXPECT_EQ(megart::nf4_nearest(table, 3, 0.25f), 0);
  EXPECT_EQ(megart::nf4_nearest(table, 3, 0.75f), 1);
  EXPECT_EQ(megart::nf4_nearest(table, 3, 0.26f), 1);
  EXPECT_EQ(megart::nf4_nearest(table, 3, 7.0f), 2);
}

// Each weight comes back within half the widest gap between neighbouring codes (-1 to -0.6962)
// times its block's absmax; with double quantization the absmax itself carries the 8-bit map's
// error, bounded here by 1% of it.
TEST(Nf4, RoundTripErrorIsBoundedByTheCodeGaps) {
  const int64_t n = 64 * 600 + 32; // 601 blocks, the last partial; 3 statistics blocks
  const std::vector<float> x = random_weights(n, 1);
  float widest = 0.0f;
  for (int k = 1; k < 16; ++k)
    widest = std::max(widest, megart::kNf4Codes[k] - megart::kNf4Codes[k - 1]);
  for (bool double_quant : {false, true}) {
    const megart::Nf4Tensor t = megart::nf4_quantize(x.data(), n, 64, double_quant);
    std::vector<float> y(static_cast<size_t>(n));
    megart::nf4_dequantize(y.data(), t);
    for (int64_t b = 0; b < t.blocks(); ++b) {
      float absmax = 0.0f;
      for (int64_t i = b * 64; i < std::min(n, (b + 1) * 64); ++i)
        absmax = std::max(absmax, std::fabs(x[static_cast<size_t>(i)]));
      EXPECT_NEAR(t.block_absmax(b), absmax, double_quant ? 0.01f * absmax : 0.0f) << b;
      for (int64_t i = b * 64; i < std::min(n, (b + 1) * 64); ++i)
        ASSERT_LE(std::fabs(y[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]),
                  0.5f * widest * absmax * (double_quant ? 1.02f : 1.0001f))
            << "element " << i << (double_quant ? " (double quantization)" : "");
    }
  }
}

// QLoRA's figure: 4 + 8/64 + 32/(64 x 256) = 4.127 bits per weight with double quantization.
TEST(Nf4, DoubleQuantizationStoresAbout4Point13BitsPerWeight) {
  const int64_t n = 64 * 256 * 8;
  const std::vector<float> x = random_weights(n, 2);
  const double with = 8.0 * megart::nf4_quantize(x.data(), n, 64, true).bytes() / n;
  const double without = 8.0 * megart::nf4_quantize(x.data(), n, 64, false).bytes() / n;
  EXPECT_NEAR(with, 4.0 + 8.0 / 64 + 32.0 / (64 * 256), 1e-3); // + the one offset
  EXPECT_DOUBLE_EQ(without, 4.5);
}

TEST(Nf4, DynamicMapIsSignedAndAscending) {
  const std::array<float, 256> &map = megart::nf4_dynamic_map();
  int negative = 0, zeros = 0;
  for (size_t i = 0; i < map.size(); ++i) {
    if (i > 0)
      EXPECT_LT(map[i - 1], map[i]) << i;
    negative += map[i] < 0.0f;
    zeros += map[i] == 0.0f;
  }
  EXPECT_EQ(negative, 127);
  EXPECT_EQ(zeros, 1);
  EXPECT_EQ(map.back(), 1.0f);
  EXPECT_NEAR(map.front(), -0.99297, 1e-5);
}

TEST(Nf4, BadInputsThrow) {
  std::vector<float> x(8, 0.5f);
  EXPECT_THROW(megart::nf4_quantize(x.data(), 7, 64, false), megart::Error); // odd count
  EXPECT_THROW(megart::nf4_quantize(x.data(), 0, 64, false), megart::Error);
  EXPECT_THROW(megart::nf4_quantize(x.data(), 8, 63, false), megart::Error);
  x[3] = NAN;
  EXPECT_THROW(megart::nf4_quantize(x.data(), 8, 64, false), megart::Error);
}

} // namespace

namespace {

// A double-quantized NF4 weight of n values in its own buffer, as QLoRA's frozen store keeps it.
struct StoredNf4 {
  megart::Nf4Tensor tensor;
  std::vector<float> buffer;
  megart::Nf4Weight weight;
  explicit StoredNf4(const std::vector<float> &x)
      : tensor(megart::nf4_quantize(x.data(), static_cast<int64_t>(x.size()), 64, true)),
        buffer(static_cast<size_t>((tensor.bytes() + 3) / 4)), weight(megart::nf4_store(tensor, buffer.data())) {}
  std::vector<float> dequantized() const {
    std::vector<float> out(static_cast<size_t>(tensor.numel));
    megart::nf4_dequantize(out.data(), weight);
    return out;
  }
};

template <typename T> std::vector<T> as(const std::vector<float> &x) {
  std::vector<T> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = megart::from_float<T>(x[i]);
  return out;
}
template <typename T> float max_abs_difference(const std::vector<T> &x, const std::vector<T> &y) {
  float d = 0.0f;
  for (size_t i = 0; i < x.size(); ++i)
    d = std::max(d, std::fabs(megart::to_float(x[i]) - megart::to_float(y[i])));
  return d;
}

// The fused GEMM equals dequantize-then-gemm (each element one fp32 sum over k, so up to
// OpenBLAS's order within it) with W [n, k] (forward, several tiles of rows) and W [k, n] (the
// backward's dX = dY W, tiles of columns), alpha and beta as given.
TEST(Nf4, GemmEqualsDequantizeThenGemm) {
  const int64_t m = 5, n = 600, k = 1000; // 2^18 / 1000 = 262 columns of C a tile: 3 tiles
  const StoredNf4 w(random_weights(n * k, 3));
  const std::vector<float> a = random_weights(m * k, 4), dense = w.dequantized();
  for (bool transpose_b : {true, false}) {
    const int64_t cols = transpose_b ? n : k, inner = transpose_b ? k : n; // W [k, n] read as [inner=n, cols=k]
    std::vector<float> expected(static_cast<size_t>(m * cols), 0.5f), got = expected;
    megart::cpu::gemm(expected.data(), a.data(), dense.data(), m, cols, inner, false, transpose_b, 0.25f, 1.0f);
    megart::cpu::gemm_nf4(got.data(), a.data(), w.weight, m, cols, inner, transpose_b, 0.25f, 1.0f);
    float scale = 0.0f;
    for (float v : expected)
      scale = std::max(scale, std::fabs(v));
    EXPECT_LE(max_abs_difference(got, expected), 1e-6f * scale) << "transpose_b " << transpose_b;
    EXPECT_NE(got, std::vector<float>(got.size(), 0.5f)); // the product was written
  }
  std::vector<float> c(static_cast<size_t>(m * n));
  EXPECT_THROW(megart::cpu::gemm_nf4(c.data(), a.data(), w.weight, m, n, k + 1, true), megart::Error);
  std::vector<float> part(300);
  megart::nf4_dequantize_range(part.data(), w.weight, 1000, 300); // across block boundaries
  EXPECT_EQ(part, std::vector<float>(dense.begin() + 1000, dense.begin() + 1300));
  EXPECT_THROW(megart::nf4_dequantize_range(part.data(), w.weight, n * k - 10, 300), megart::Error);
}

// Under --bf16 the GEMM rounds a float weight to bf16: the fused one rounds its tile the same
// way, with bf16 A and C.
TEST(Nf4, GemmRoundsTheTilePerTheGemmPrecision) {
  using megart::bf16_t;
  const int64_t m = 3, n = 96, k = 128;
  const StoredNf4 w(random_weights(n * k, 5));
  const std::vector<float> dense = w.dequantized();
  const std::vector<bf16_t> a = as<bf16_t>(random_weights(m * k, 6));
  std::vector<bf16_t> expected(static_cast<size_t>(m * n)), got = expected, unrounded = expected;
  megart::cpu::gemm_nf4(unrounded.data(), a.data(), w.weight, m, n, k, true);
  megart::cpu::set_gemm_precision(megart::Precision::Bf16);
  megart::cpu::gemm(expected.data(), a.data(), dense.data(), m, n, k, false, true);
  megart::cpu::gemm_nf4(got.data(), a.data(), w.weight, m, n, k, true);
  megart::cpu::set_gemm_precision(megart::Precision::Fp32);
  EXPECT_EQ(max_abs_difference(got, expected), 0.0f); // one tile: the same sgemm on the same operands
  EXPECT_GT(max_abs_difference(unrounded, expected), 0.0f); // in fp32 it differs: the rounding is seen
}

} // namespace

// QLoRA's frozen store keeps a weight as one buffer (megart::nf4_store): its size is the
// compiler's prediction and its dequantization the tensor's, value for value.
TEST(Nf4, StoredWeightDequantizesAsTheTensor) {
  const int64_t n = 64 * 600; // 600 blocks: 3 blocks of statistics
  const std::vector<float> x = random_weights(n, 7);
  const megart::Nf4Tensor t = megart::nf4_quantize(x.data(), n, 64, /*double_quant=*/true);
  EXPECT_EQ(megart::nf4_weight_bytes(n, 64), t.bytes());
  std::vector<float> buffer(static_cast<size_t>((t.bytes() + 3) / 4));
  const megart::Nf4Weight w = megart::nf4_store(t, buffer.data());
  std::vector<float> expected(static_cast<size_t>(n)), got(static_cast<size_t>(n));
  megart::nf4_dequantize(expected.data(), t);
  megart::nf4_dequantize(got.data(), w);
  EXPECT_EQ(got, expected);
  const megart::Nf4Tensor single = megart::nf4_quantize(x.data(), n, 64, /*double_quant=*/false);
  EXPECT_THROW(megart::nf4_store(single, buffer.data()), megart::Error);
}
