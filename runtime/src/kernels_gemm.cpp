// GEMM: thin wrappers over OpenBLAS. OpenBLAS threads internally, so the batch loop stays serial.
//
// set_gemm_precision(Bf16 / Fp16) emulates the CUDA backend's low-precision GEMM (cuBLASLt on
// bf16 / fp16 operands with fp32 accumulation): A and B are rounded to the narrow format (kept
// as floats) into thread-local scratch, and cblas_sgemm multiplies those. A product of two bf16
// or fp16 values is exact in fp32, so the result is the tensor core's up to the fp32 summation
// order. Fp32 takes the plain cblas_sgemm path, unchanged.
#include "megart/bf16.h"
#include "megart/error.h"
#include "megart/kernels.h"

#include <cblas.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace megart::cpu {
namespace {

std::atomic<Precision> g_precision{Precision::Fp32};

// cblas takes 32-bit ints (non-ILP64 OpenBLAS); refuse sizes it would truncate.
blasint to_blas(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw Error(std::string("gemm: ") + what + " (" + std::to_string(v) +
                ") is outside [0, 2^31) supported by cblas_sgemm");
  return static_cast<blasint>(v);
}

inline uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

constexpr uint32_t kExponentMask = 0x7F800000u; // fp32 inf
constexpr uint32_t kSignMask = 0x80000000u;

// Round to nearest even, keeping `keep` of fp32's 23 fraction bits: add half an ulp of the kept
// format, minus one unless the last kept bit is odd, then truncate. A carry out of the fraction
// bumps the exponent (also into inf past the largest finite value), as rounding should.
inline uint32_t round_fraction(uint32_t u, int keep) {
  const int drop = 23 - keep;
  const uint32_t half = (1u << (drop - 1)) - 1u;
  u += half + ((u >> drop) & 1u);
  return u & ~((1u << drop) - 1u);
}

// NaN stays a (quiet) NaN of the narrow format, with its sign; inf stays inf.
inline float non_finite(uint32_t u, int keep) {
  if (u & 0x007FFFFFu)
    u = (u | 0x00400000u) & ~((1u << (23 - keep)) - 1u);
  return from_bits(u);
}

// bf16: fp32's exponent range (subnormals included), 7 fraction bits.
inline float round_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// fp16: 10 fraction bits; normal from 2^-14 up to 65504, subnormal below 2^-14 (multiples of
// 2^-24), inf beyond 65504 after rounding.
inline float round_fp16(float x) {
  const uint32_t u = bits_of(x);
  const uint32_t mag = u & ~kSignMask;
  if (mag >= kExponentMask)
    return non_finite(u, 10);
  if (mag < 0x38800000u) // |x| < 2^-14: x * 2^24 is exact, rint rounds to nearest even
    return std::rint(x * 0x1p24f) * 0x1p-24f; // keeps the sign of a zero
  const uint32_t r = round_fraction(u, 10);
  if ((r & ~kSignMask) > 0x477FE000u) // 65504, the largest fp16
    return from_bits((u & kSignMask) | kExponentMask);
  return from_bits(r);
}

// The rounded copy of one operand (n floats at `src`) in this thread's scratch slot.
const float* rounded(const float* src, int64_t n, Precision p, int slot) {
  thread_local std::vector<float> scratch[2];
  std::vector<float>& s = scratch[slot];
  if (static_cast<int64_t>(s.size()) < n)
    s.resize(static_cast<size_t>(n));
  round_to_precision(s.data(), src, n, p);
  return s.data();
}

// The fp32 product on the operands as given.
void sgemm(float* c, const float* a, const float* b, int64_t m, int64_t n, int64_t k,
           bool transpose_a, bool transpose_b, float alpha, float beta) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    // Empty inner dimension: BLAS rejects lda = 0, and the product is zero anyway.
    for (int64_t i = 0; i < m * n; ++i)
      c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    return;
  }
  const int64_t lda = transpose_a ? m : k;
  const int64_t ldb = transpose_b ? k : n;
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, to_blas(m, "m"), to_blas(n, "n"),
              to_blas(k, "k"), alpha, a, to_blas(lda, "lda"), b, to_blas(ldb, "ldb"), beta, c,
              to_blas(n, "ldc"));
}

} // namespace

void set_gemm_precision(Precision p) { g_precision = p; }
Precision gemm_precision() { return g_precision; }

void round_to_precision(float* out, const float* in, int64_t n, Precision p) {
  if (p == Precision::Bf16) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i)
      out[i] = round_bf16(in[i]);
  } else if (p == Precision::Fp16) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i)
      out[i] = round_fp16(in[i]);
  } else if (out != in && n > 0) {
    std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
  }
}

void gemm(float* c, const float* a, const float* b, int64_t m, int64_t n, int64_t k,
          bool transpose_a, bool transpose_b, float alpha, float beta) {
  const Precision p = g_precision;
  if (p != Precision::Fp32 && m > 0 && n > 0 && k > 0) {
    // Both operands are dense (lda / ldb are their row lengths): m*k and k*n floats.
    a = rounded(a, m * k, p, 0);
    b = rounded(b, k * n, p, 1);
  }
  sgemm(c, a, b, m, n, k, transpose_a, transpose_b, alpha, beta);
}

void gemm_batched(float* c, const float* a, const float* b, int64_t batch, int64_t m, int64_t n,
                  int64_t k, bool transpose_a, bool transpose_b, int64_t stride_a,
                  int64_t stride_b, int64_t stride_c, float alpha, float beta) {
  const Precision p = g_precision;
  const bool round = p != Precision::Fp32 && m > 0 && n > 0 && k > 0;
  const float *ra = nullptr, *rb = nullptr;
  // Serial and in batch order, so stride_c = 0 with beta = 1 is a well-defined accumulation.
  for (int64_t i = 0; i < batch; ++i) {
    const float *ai = a + i * stride_a, *bi = b + i * stride_b;
    if (round) {
      // A broadcast operand (stride 0) is rounded once.
      if (i == 0 || stride_a != 0)
        ra = rounded(ai, m * k, p, 0);
      if (i == 0 || stride_b != 0)
        rb = rounded(bi, k * n, p, 1);
      ai = ra;
      bi = rb;
    }
    sgemm(c + i * stride_c, ai, bi, m, n, k, transpose_a, transpose_b, alpha, beta);
  }
}

// The CPU gains nothing from a fused epilogue (BLAS has none): the unfused kernels, in the
// unfused order, keep the results bitwise equal to the program before fusion (in every gemm
// precision: gemm rounds the operands).
void gemm_bias(float *out, const float *a, const float *b, const float *bias, int64_t m, int64_t n, int64_t k,
               bool transpose_b) {
  gemm(out, a, b, m, n, k, false, transpose_b);
  add(out, out, bias, m, n);
}

void gemm_bias_gelu(float *pre, float *out, const float *a, const float *b, const float *bias, int64_t m,
                    int64_t n, int64_t k, bool transpose_b, bool tanh) {
  gemm_bias(pre, a, b, bias, m, n, k, transpose_b);
  if (tanh)
    gelu_tanh_forward(out, pre, m * n);
  else
    gelu_erf_forward(out, pre, m * n);
}

} // namespace megart::cpu
