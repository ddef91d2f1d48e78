// The CPU's emulation of the CUDA backend's bf16 / fp16 GEMMs (cpu::set_gemm_precision): the
// operand rounding against an independent double-precision reference, its edge cases (ties to
// even, fp16 overflow and subnormals), and gemm / gemm_batched / gemm_bias(_gelu) equal, bit for
// bit, to the fp32 kernels run on operands rounded beforehand.
#include "kernels_test_util.h"
#include "megart/bf16.h"
#include "megart/device.h"
#include "megart/kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <thread>
#include <vector>

namespace megart {
// Test names print the precision's name (gtest finds it by argument-dependent lookup).
inline void PrintTo(Precision p, std::ostream *os) { *os << precision_name(p); }
} // namespace megart

namespace {

using namespace megart::test;
using megart::Precision;
namespace cpu = megart::cpu;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Sets the GEMM precision for one test and puts fp32 back after it (the setting is process-wide).
struct GemmPrecision {
  explicit GemmPrecision(Precision p) { cpu::set_gemm_precision(p); }
  ~GemmPrecision() { cpu::set_gemm_precision(Precision::Fp32); }
};

// x rounded to p in double arithmetic, from the formats' definitions: the nearest multiple of
// the ulp at x's exponent (at least the smallest normal exponent, where subnormals keep that
// spacing), ties to even (nearbyint in the default rounding mode), then +-inf past the largest
// finite value.
float reference_round(float x, Precision p) {
  if (p == Precision::Fp32 || !std::isfinite(x) || x == 0.0f)
    return x;
  const bool bf16 = p == Precision::Bf16;
  const int fraction_bits = bf16 ? 7 : 10;
  const int min_exponent = bf16 ? -126 : -14;
  const double largest = bf16 ? std::ldexp(2.0 - std::ldexp(1.0, -7), 127) : 65504.0;
  const double ulp = std::ldexp(1.0, std::max(std::ilogb(x), min_exponent) - fraction_bits);
  const double r = std::nearbyint(static_cast<double>(x) / ulp) * ulp;
  if (std::fabs(r) > largest)
    return std::copysign(kInf, x);
  return static_cast<float>(std::copysign(r, static_cast<double>(x))); // -0 stays -0
}

Vec reference_round(const Vec &v, Precision p) {
  Vec out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), [p](float x) { return reference_round(x, p); });
  return out;
}

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float round1(float x, Precision p) {
  float out;
  cpu::round_to_precision(&out, &x, 1, p);
  return out;
}

// Bitwise equality (so -0 != +0 and inf == inf count).
void expect_same_bits(const Vec &got, const Vec &want, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (bits(got[i]) != bits(want[i]) && reported++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
  EXPECT_EQ(reported, 0) << what << ": elements differ";
}

const Precision kLowPrecisions[] = {Precision::Bf16, Precision::Fp16};

// Every finite float class: random bit patterns over the whole range, and values scattered
// around fp16's range (its subnormals, normals and overflow threshold) and around ties.
Vec rounding_inputs() {
  Vec v;
  std::mt19937 gen(42);
  std::uniform_int_distribution<uint32_t> any_bits;
  while (v.size() < 200000) {
    float x;
    const uint32_t u = any_bits(gen);
    std::memcpy(&x, &u, sizeof x);
    if (std::isfinite(x))
      v.push_back(x);
  }
  std::uniform_real_distribution<double> exponent(-27.0, 17.0);
  for (int i = 0; i < 200000; ++i)
    v.push_back(static_cast<float>((i % 2 ? -1 : 1) * std::exp2(exponent(gen))));
  // Exact ties of both formats: an odd multiple of half an ulp.
  for (int e = -26; e < 17; ++e)
    for (int odd = 1; odd < 64; odd += 2) {
      v.push_back(std::ldexp(1.0f + odd * std::ldexp(1.0f, -11), e));
      v.push_back(std::ldexp(1.0f + odd * std::ldexp(1.0f, -8), e));
    }
  return v;
}

TEST(KernelsGemmPrecision, RoundingMatchesTheDoubleReference) {
  const Vec in = rounding_inputs();
  for (Precision p : kLowPrecisions) {
    Vec out(in.size());
    cpu::round_to_precision(out.data(), in.data(), static_cast<int64_t>(in.size()), p);
    expect_same_bits(out, reference_round(in, p), megart::precision_name(p));
    // Idempotent: rounded values are representable.
    Vec again(out.size());
    cpu::round_to_precision(again.data(), out.data(), static_cast<int64_t>(out.size()), p);
    expect_same_bits(again, out, std::string(megart::precision_name(p)) + " twice");
  }
  Vec copy(in.size());
  cpu::round_to_precision(copy.data(), in.data(), static_cast<int64_t>(in.size()), Precision::Fp32);
  expect_same_bits(copy, in, "fp32");
}

TEST(KernelsGemmPrecision, TiesRoundToEven) {
  const float e8 = std::ldexp(1.0f, -8), e11 = std::ldexp(1.0f, -11);
  // bf16 keeps 7 fraction bits: 1 + 2^-8 is halfway between 1 (even) and 1 + 2^-7 (odd).
  EXPECT_EQ(round1(1.0f + e8, Precision::Bf16), 1.0f);
  EXPECT_EQ(round1(1.0f + 3 * e8, Precision::Bf16), 1.0f + 4 * e8);
  EXPECT_EQ(round1(-(1.0f + 3 * e8), Precision::Bf16), -(1.0f + 4 * e8));
  EXPECT_EQ(round1(1.0f + e8 + std::ldexp(1.0f, -20), Precision::Bf16), 1.0f + 2 * e8); // past the tie
  EXPECT_EQ(round1(257.0f, Precision::Bf16), 256.0f);
  EXPECT_EQ(round1(259.0f, Precision::Bf16), 260.0f);
  // fp16 keeps 10 fraction bits.
  EXPECT_EQ(round1(1.0f + e11, Precision::Fp16), 1.0f);
  EXPECT_EQ(round1(1.0f + 3 * e11, Precision::Fp16), 1.0f + 4 * e11);
  EXPECT_EQ(round1(2049.0f, Precision::Fp16), 2048.0f);
  EXPECT_EQ(round1(2051.0f, Precision::Fp16), 2052.0f);
  EXPECT_EQ(round1(2049.0f, Precision::Bf16), 2048.0f);
}

TEST(KernelsGemmPrecision, Fp16OverflowsToInfinity) {
  EXPECT_EQ(round1(65504.0f, Precision::Fp16), 65504.0f);
  EXPECT_EQ(round1(65519.0f, Precision::Fp16), 65504.0f); // below the tie with 65536
  EXPECT_EQ(round1(65520.0f, Precision::Fp16), kInf);     // the tie rounds to even: 2^16, too big
  EXPECT_EQ(round1(-70000.0f, Precision::Fp16), -kInf);
  EXPECT_EQ(round1(3e38f, Precision::Fp16), kInf);
  EXPECT_EQ(round1(kInf, Precision::Fp16), kInf);
  EXPECT_EQ(round1(-kInf, Precision::Bf16), -kInf);
  EXPECT_TRUE(std::isnan(round1(std::numeric_limits<float>::quiet_NaN(), Precision::Fp16)));
  EXPECT_TRUE(std::isnan(round1(std::numeric_limits<float>::quiet_NaN(), Precision::Bf16)));
  // bf16 has fp32's range: 70000 is finite (8 significant bits: 137 x 2^9), only past its
  // largest value does it overflow.
  EXPECT_EQ(round1(70000.0f, Precision::Bf16), 70144.0f);
  EXPECT_TRUE(std::isfinite(round1(3e38f, Precision::Bf16)));
  EXPECT_EQ(round1(std::numeric_limits<float>::max(), Precision::Bf16), kInf);
}

TEST(KernelsGemmPrecision, Fp16SubnormalsAndUnderflow) {
  const float s = std::ldexp(1.0f, -24); // the smallest fp16 subnormal, and their spacing
  EXPECT_EQ(round1(s, Precision::Fp16), s);
  EXPECT_EQ(round1(s / 2, Precision::Fp16), 0.0f);         // the tie with 0 goes to 0
  EXPECT_EQ(round1(s / 2 * 1.001f, Precision::Fp16), s);   // past it, up
  EXPECT_EQ(round1(3 * s / 2, Precision::Fp16), 2 * s);    // tie between 1 and 2 spacings: 2
  EXPECT_EQ(round1(5 * s / 2, Precision::Fp16), 2 * s);    // between 2 and 3: 2
  EXPECT_EQ(round1(1000.4f * s, Precision::Fp16), 1000 * s);
  EXPECT_EQ(round1(1023.5f * s, Precision::Fp16), 1024 * s); // up to the smallest normal, 2^-14
  const float neg = round1(-s / 4, Precision::Fp16);
  EXPECT_EQ(neg, 0.0f);
  EXPECT_TRUE(std::signbit(neg)); // underflow keeps the sign
  // Normal fp16 below 2^-13 is spaced 2^-24 too; above, 2^-23.
  EXPECT_EQ(round1(std::ldexp(1.0f, -14) + 1.5f * s, Precision::Fp16), std::ldexp(1.0f, -14) + 2 * s);
  EXPECT_EQ(round1(std::ldexp(1.0f, -13) + s, Precision::Fp16), std::ldexp(1.0f, -13)); // tie, even
  // bf16 keeps fp32's subnormals (its own spacing there is 2^-133).
  EXPECT_EQ(round1(std::ldexp(1.0f, -130), Precision::Bf16), std::ldexp(1.0f, -130));
  EXPECT_EQ(round1(std::ldexp(1.0f, -24) / 2, Precision::Bf16), std::ldexp(1.0f, -25));
}

class KernelsGemmLowPrecision
    : public ::testing::TestWithParam<std::tuple<Precision, int, int, int, bool, bool>> {};

// In bf16 / fp16 mode gemm is exactly fp32 gemm on operands rounded beforehand: same bits.
TEST_P(KernelsGemmLowPrecision, EqualsSgemmOfRoundedInputs) {
  const auto [p, m, n, k, ta, tb] = GetParam();
  const Vec a = random_vec(m * k, 1, -3.0f, 3.0f), b = random_vec(k * n, 2, -3.0f, 3.0f);
  const Vec ra = reference_round(a, p), rb = reference_round(b, p);
  for (const auto &[alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.25f}}) {
    const Vec c0 = random_vec(m * n, 3);
    Vec want = c0, got = c0;
    cpu::gemm(want.data(), ra.data(), rb.data(), m, n, k, ta, tb, alpha, beta); // fp32
    {
      GemmPrecision low(p);
      const Vec a_before = a, b_before = b;
      cpu::gemm(got.data(), a.data(), b.data(), m, n, k, ta, tb, alpha, beta);
      EXPECT_EQ(a, a_before); // the operands are rounded in copies
      EXPECT_EQ(b, b_before);
    }
    expect_same_bits(got, want, "gemm");
    // And it is really rounded: the fp32 product of the unrounded operands differs.
    Vec fp32 = c0;
    cpu::gemm(fp32.data(), a.data(), b.data(), m, n, k, ta, tb, alpha, beta);
    EXPECT_NE(fp32, got);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, KernelsGemmLowPrecision,
                         ::testing::Combine(::testing::ValuesIn(kLowPrecisions), ::testing::Values(1, 33),
                                            ::testing::Values(5, 64), ::testing::Values(13, 70),
                                            ::testing::Bool(), ::testing::Bool()));

TEST(KernelsGemmPrecision, Fp32IsPlainSgemm) {
  const int64_t m = 17, n = 9, k = 31;
  const Vec a = random_vec(m * k, 4), b = random_vec(k * n, 5);
  Vec got(m * n), want(m * n);
  EXPECT_EQ(cpu::gemm_precision(), Precision::Fp32);
  cpu::gemm(got.data(), a.data(), b.data(), m, n, k, false, true);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f,
              want.data(), n);
  expect_same_bits(got, want, "fp32 gemm");
}

// A 1x1x1 product shows each operand's rounding: 70000 overflows fp16 (inf), not bf16.
TEST(KernelsGemmPrecision, Fp16OperandOverflowGivesInf) {
  const float big = 70000.0f, one = 1.0f;
  float c = 0.0f;
  {
    GemmPrecision low(Precision::Fp16);
    cpu::gemm(&c, &big, &one, 1, 1, 1, false, false);
    EXPECT_EQ(c, kInf);
    cpu::gemm(&c, &one, &big, 1, 1, 1, false, false);
    EXPECT_EQ(c, kInf);
    const float x = 1.0f + std::ldexp(1.0f, -11); // rounds to 1 in fp16
    cpu::gemm(&c, &x, &x, 1, 1, 1, false, false);
    EXPECT_EQ(c, 1.0f);
  }
  {
    GemmPrecision low(Precision::Bf16);
    cpu::gemm(&c, &big, &one, 1, 1, 1, false, false);
    EXPECT_EQ(c, 70144.0f);
  }
  cpu::gemm(&c, &big, &one, 1, 1, 1, false, false);
  EXPECT_EQ(c, 70000.0f); // fp32 again
}

TEST(KernelsGemmPrecision, BatchedBroadcastAndAccumulate) {
  const int64_t batch = 3, m = 5, n = 4, k = 6;
  for (Precision p : kLowPrecisions) {
    // A per batch, B broadcast (stride 0, rounded once), transposed B.
    const Vec a = random_vec(batch * m * k, 6), b = random_vec(n * k, 7);
    const Vec c0 = random_vec(batch * m * n, 8);
    Vec want = c0, got = c0;
    const Vec ra = reference_round(a, p), rb = reference_round(b, p);
    cpu::gemm_batched(want.data(), ra.data(), rb.data(), batch, m, n, k, false, true, m * k, 0, m * n, 2.0f, 1.0f);
    {
      GemmPrecision low(p);
      cpu::gemm_batched(got.data(), a.data(), b.data(), batch, m, n, k, false, true, m * k, 0, m * n, 2.0f, 1.0f);
    }
    expect_same_bits(got, want, "gemm_batched broadcast");

    // stride_c = 0, beta = 1: C += sum_i A_i^T B_i, every A_i and B_i rounded.
    const Vec a2 = random_vec(batch * k * m, 9), b2 = random_vec(batch * k * n, 10);
    const Vec c2 = random_vec(m * n, 11);
    Vec want2 = c2, got2 = c2;
    const Vec ra2 = reference_round(a2, p), rb2 = reference_round(b2, p);
    cpu::gemm_batched(want2.data(), ra2.data(), rb2.data(), batch, m, n, k, true, false, k * m, k * n, 0, 1.0f, 1.0f);
    {
      GemmPrecision low(p);
      cpu::gemm_batched(got2.data(), a2.data(), b2.data(), batch, m, n, k, true, false, k * m, k * n, 0, 1.0f, 1.0f);
    }
    expect_same_bits(got2, want2, "gemm_batched accumulate");
  }
}

// The fused linear layers go through gemm, so they follow the precision; the bias add and the
// GELU stay fp32.
TEST(KernelsGemmPrecision, FusedLinearLayersFollow) {
  const int64_t m = 7, n = 12, k = 20;
  const Vec a = random_vec(m * k, 12), w = random_vec(n * k, 13), bias = random_vec(n, 14);
  for (Precision p : kLowPrecisions) {
    const Vec ra = reference_round(a, p), rw = reference_round(w, p);
    Vec want_pre(m * n), want_out(m * n), pre(m * n), out(m * n), lin(m * n), want_lin(m * n);
    cpu::gemm_bias(want_lin.data(), ra.data(), rw.data(), bias.data(), m, n, k, true);
    cpu::gemm_bias_gelu(want_pre.data(), want_out.data(), ra.data(), rw.data(), bias.data(), m, n, k, true, true);
    {
      GemmPrecision low(p);
      cpu::gemm_bias(lin.data(), a.data(), w.data(), bias.data(), m, n, k, true);
      cpu::gemm_bias_gelu(pre.data(), out.data(), a.data(), w.data(), bias.data(), m, n, k, true, true);
    }
    expect_same_bits(lin, want_lin, "gemm_bias");
    expect_same_bits(pre, want_pre, "gemm_bias_gelu pre");
    expect_same_bits(out, want_out, "gemm_bias_gelu out");
  }
}

// The scratch copies are per thread: concurrent GEMMs do not overwrite each other's operands.
TEST(KernelsGemmPrecision, ConcurrentCallsKeepTheirOwnScratch) {
  const int64_t m = 40, n = 30, k = 50;
  std::vector<Vec> as, bs, want;
  for (uint32_t t = 0; t < 4; ++t) {
    as.push_back(random_vec(m * k, 20 + t));
    bs.push_back(random_vec(k * n, 30 + t));
    want.emplace_back(m * n);
    cpu::gemm(want.back().data(), reference_round(as[t], Precision::Bf16).data(),
              reference_round(bs[t], Precision::Bf16).data(), m, n, k, false, false);
  }
  GemmPrecision low(Precision::Bf16);
  std::vector<Vec> got(4, Vec(m * n));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep)
        cpu::gemm(got[t].data(), as[t].data(), bs[t].data(), m, n, k, false, false);
    });
  for (auto &th : threads)
    th.join();
  for (int t = 0; t < 4; ++t)
    expect_same_bits(got[t], want[t], "thread " + std::to_string(t));
}

} // namespace

// --grad-reduce-in-bf16's conversions on the CPU device: to bf16 bits and back is the operand
// rounding above; NaN stays NaN.
TEST(KernelsGemmPrecision, DeviceBf16ConversionsAreTheRounding) {
  Vec in = rounding_inputs();
  in.push_back(kInf);
  in.push_back(-kInf);
  const auto n = static_cast<int64_t>(in.size());
  std::vector<uint16_t> bf16(in.size());
  megart::cpu_device().to_bf16(bf16.data(), in.data(), n);
  Vec back(in.size());
  megart::cpu_device().from_bf16(back.data(), bf16.data(), n);
  expect_same_bits(back, reference_round(in, Precision::Bf16), "to_bf16 then from_bf16");
  for (size_t i = 0; i < in.size(); ++i) // the bits are the upper half of the rounded float
    ASSERT_EQ(bf16[i], bits(back[i]) >> 16) << i;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  uint16_t nan_bits = 0;
  megart::cpu_device().to_bf16(&nan_bits, &nan, 1);
  EXPECT_TRUE(std::isnan(megart::bf16_to_float(nan_bits)));
}
