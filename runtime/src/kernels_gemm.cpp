// GEMM: thin wrappers over OpenBLAS. OpenBLAS threads internally, so the batch loop stays serial.
//
// set_gemm_precision(Bf16 / Fp16) emulates the CUDA backend's low-precision GEMM (cuBLASLt on
// bf16 / fp16 operands with fp32 accumulation): A and B are rounded to the narrow format (kept
// as floats) into thread-local scratch, and cblas_sgemm multiplies those. A product of two bf16
// or fp16 values is exact in fp32, so the result is the tensor core's up to the fp32 summation
// order. Fp32 takes the plain cblas_sgemm path, unchanged.
//
// 16-bit operands (bf16_t / fp16_t, --bf16 / --fp16 activations) are widened into the same
// scratch (already narrow, they need no rounding); a 16-bit C is computed in fp32 scratch and
// rounded once on store.
#include "kernels_detail.h"
#include "megart/bf16.h"
#include "megart/error.h"
#include "megart/kernels.h"
#include "megart/nf4.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
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

// This thread's scratch slot `slot` (0: A, 1: B, 2: a 16-bit C), at least n floats.
float* scratch(int slot, int64_t n) {
  thread_local std::vector<float> slots[3];
  std::vector<float>& s = slots[slot];
  if (static_cast<int64_t>(s.size()) < n)
    s.resize(static_cast<size_t>(n));
  return s.data();
}

// The rounded copy of one operand (n floats at `src`) in this thread's scratch slot.
const float* rounded(const float* src, int64_t n, Precision p, int slot) {
  float* s = scratch(slot, n);
  round_to_precision(s, src, n, p);
  return s;
}

// A GEMM operand as the fp32 that cblas_sgemm multiplies: a float one rounded per the gemm
// precision (as given in Fp32 or when the product is empty), a 16-bit one widened.
const float* operand(const float* src, int64_t n, Precision p, bool nonempty, int slot) {
  return p != Precision::Fp32 && nonempty ? rounded(src, n, p, slot) : src;
}
template <typename T> const float* operand(const T* src, int64_t n, Precision, bool, int slot) {
  float* s = scratch(slot, n);
  detail::convert(s, src, n);
  return s;
}

// Where the product into C (n floats) is computed: C itself when float, else fp32 scratch
// holding C widened when beta reads it.
float* result(float* c, int64_t, float) { return c; }
template <typename T> float* result(T* c, int64_t n, float beta) {
  float* s = scratch(2, n);
  if (beta != 0.0f)
    detail::convert(s, c, n);
  return s;
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

template <typename C, typename Ta, typename Tb>
void gemm(C* c, const Ta* a, const Tb* b, int64_t m, int64_t n, int64_t k, bool transpose_a,
          bool transpose_b, float alpha, float beta) {
  const Precision p = g_precision;
  const bool nonempty = m > 0 && n > 0 && k > 0;
  // Both operands are dense (lda / ldb are their row lengths): m*k and k*n elements.
  const float* fa = operand(a, m * k, p, nonempty, 0);
  const float* fb = operand(b, k * n, p, nonempty, 1);
  float* fc = result(c, m * n, beta);
  sgemm(fc, fa, fb, m, n, k, transpose_a, transpose_b, alpha, beta);
  detail::store_row(c, fc, m * n);
}

void gemm(float* c, const float* a, const float* b, int64_t m, int64_t n, int64_t k,
          bool transpose_a, bool transpose_b, float alpha, float beta) {
  gemm<float, float, float>(c, a, b, m, n, k, transpose_a, transpose_b, alpha, beta);
}

template <typename C, typename Ta, typename Tb>
void gemm_batched(C* c, const Ta* a, const Tb* b, int64_t batch, int64_t m, int64_t n, int64_t k,
                  bool transpose_a, bool transpose_b, int64_t stride_a, int64_t stride_b,
                  int64_t stride_c, float alpha, float beta) {
  const Precision p = g_precision;
  const bool nonempty = m > 0 && n > 0 && k > 0;
  const float *fa = nullptr, *fb = nullptr;
  float* fc = nullptr;
  // Serial and in batch order, so stride_c = 0 with beta = 1 is a well-defined accumulation.
  for (int64_t i = 0; i < batch; ++i) {
    // A broadcast operand (stride 0) is rounded / widened once; a broadcast 16-bit C stays in
    // fp32 across the products and is rounded once after the last.
    if (i == 0 || stride_a != 0)
      fa = operand(a + i * stride_a, m * k, p, nonempty, 0);
    if (i == 0 || stride_b != 0)
      fb = operand(b + i * stride_b, k * n, p, nonempty, 1);
    if (i == 0 || stride_c != 0)
      fc = result(c + i * stride_c, m * n, beta);
    sgemm(fc, fa, fb, m, n, k, transpose_a, transpose_b, alpha, beta);
    if (stride_c != 0 || i == batch - 1)
      detail::store_row(c + i * stride_c, fc, m * n);
  }
}

void gemm_batched(float* c, const float* a, const float* b, int64_t batch, int64_t m, int64_t n,
                  int64_t k, bool transpose_a, bool transpose_b, int64_t stride_a,
                  int64_t stride_b, int64_t stride_c, float alpha, float beta) {
  gemm_batched<float, float, float>(c, a, b, batch, m, n, k, transpose_a, transpose_b, stride_a,
                                    stride_b, stride_c, alpha, beta);
}

// The CPU gains nothing from a fused epilogue (BLAS has none): the unfused kernels, in the
// unfused order, keep the results bitwise equal to the program before fusion (in every gemm
// precision: gemm rounds the operands; with a 16-bit out, each step rounds its store).
template <typename O, typename Ta, typename Tw>
void gemm_bias(O* out, const Ta* a, const Tw* w, const float* bias, int64_t m, int64_t n, int64_t k,
               bool transpose_b) {
  gemm(out, a, w, m, n, k, false, transpose_b);
  add(out, out, bias, m, n);
}

void gemm_bias(float *out, const float *a, const float *b, const float *bias, int64_t m, int64_t n, int64_t k,
               bool transpose_b) {
  gemm_bias<float, float, float>(out, a, b, bias, m, n, k, transpose_b);
}

template <typename O, typename Ta, typename Tw>
void gemm_bias_gelu(O* pre, O* out, const Ta* a, const Tw* w, const float* bias, int64_t m, int64_t n,
                    int64_t k, bool transpose_b, bool tanh) {
  gemm_bias(pre, a, w, bias, m, n, k, transpose_b);
  if (tanh)
    gelu_tanh_forward(out, pre, m * n);
  else
    gelu_erf_forward(out, pre, m * n);
}

void gemm_bias_gelu(float *pre, float *out, const float *a, const float *b, const float *bias, int64_t m,
                    int64_t n, int64_t k, bool transpose_b, bool tanh) {
  gemm_bias_gelu<float, float, float>(pre, out, a, b, bias, m, n, k, transpose_b, tanh);
}

// QLoRA's GEMM (megart/nf4.h): the NF4 weight dequantized a tile at a time into the B scratch.
template <typename C, typename Ta>
void gemm_nf4(C* c, const Ta* a, const Nf4Weight& w, int64_t m, int64_t n, int64_t k, bool transpose_b,
              float alpha, float beta) {
  if (m < 0 || n < 1 || k < 1 || n > INT_MAX || k > INT_MAX || w.numel != n * k)
    throw Error("gemm_nf4: m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) +
                " with an NF4 weight of " + std::to_string(w.numel) + " elements; it must hold n x k");
  if (m == 0)
    return;
  constexpr int64_t kTileFloats = int64_t{1} << 18;
  const Precision p = g_precision;
  const float* fa = operand(a, m * k, p, true, 0);
  float* fc = result(c, m * n, beta);
  const int64_t tile_cols = std::max<int64_t>(1, std::min(n, kTileFloats / k)); // columns of C a tile feeds
  float* tile = scratch(1, tile_cols * k);
  for (int64_t c0 = 0; c0 < n; c0 += tile_cols) {
    const int64_t count = std::min(tile_cols, n - c0);
    // The tile holds op(W)'s columns [c0, c0 + count): rows of W [n, k], or a piece of each of
    // W [k, n]'s rows.
    const int64_t rows = transpose_b ? count : k, len = transpose_b ? k : count;
#pragma omp parallel for schedule(static) if (rows * len > (1 << 16))
    for (int64_t r = 0; r < rows; ++r)
      nf4_dequantize_range(tile + r * len, w, transpose_b ? (c0 + r) * k : r * n + c0, len);
    round_to_precision(tile, tile, rows * len, p); // as gemm rounds a float B
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, to_blas(m, "m"),
                to_blas(count, "n"), to_blas(k, "k"), alpha, fa, to_blas(k, "lda"), tile, to_blas(len, "ldb"), beta,
                fc + c0, to_blas(n, "ldc"));
  }
  detail::store_row(c, fc, m * n);
}

// Every mix of float and one 16-bit type T but all-float (the functions above).
#define MEGART_GEMM_FAMILY(C, A, B)                                                               \
  template void gemm<C, A, B>(C*, const A*, const B*, int64_t, int64_t, int64_t, bool, bool, float, \
                              float);                                                             \
  template void gemm_batched<C, A, B>(C*, const A*, const B*, int64_t, int64_t, int64_t, int64_t,  \
                                      bool, bool, int64_t, int64_t, int64_t, float, float);       \
  template void gemm_bias<C, A, B>(C*, const A*, const B*, const float*, int64_t, int64_t,         \
                                   int64_t, bool);                                                \
  template void gemm_bias_gelu<C, A, B>(C*, C*, const A*, const B*, const float*, int64_t,         \
                                        int64_t, int64_t, bool, bool);
#define MEGART_GEMM_MIXES(T)                                                                       \
  MEGART_GEMM_FAMILY(T, float, float)                                                              \
  MEGART_GEMM_FAMILY(float, T, float)                                                              \
  MEGART_GEMM_FAMILY(float, float, T)                                                              \
  MEGART_GEMM_FAMILY(T, T, float)                                                                  \
  MEGART_GEMM_FAMILY(T, float, T)                                                                  \
  MEGART_GEMM_FAMILY(float, T, T)                                                                  \
  MEGART_GEMM_FAMILY(T, T, T)
MEGART_GEMM_MIXES(bf16_t)
MEGART_GEMM_MIXES(fp16_t)

// gemm_nf4 with C and A each float or one 16-bit type T.
#define MEGART_GEMM_NF4(C, A)                                                                      \
  template void gemm_nf4<C, A>(C*, const A*, const Nf4Weight&, int64_t, int64_t, int64_t, bool, float, float);
MEGART_GEMM_NF4(float, float)
MEGART_GEMM_NF4(bf16_t, bf16_t)
MEGART_GEMM_NF4(bf16_t, float)
MEGART_GEMM_NF4(float, bf16_t)
MEGART_GEMM_NF4(fp16_t, fp16_t)
MEGART_GEMM_NF4(fp16_t, float)
MEGART_GEMM_NF4(float, fp16_t)
} // namespace megart::cpu
