// GEMM: thin wrappers over OpenBLAS. OpenBLAS threads internally, so the batch loop stays serial.
#include "megart/error.h"
#include "megart/kernels.h"

#include <cblas.h>

#include <climits>
#include <string>

namespace megart::cpu {
namespace {

// cblas takes 32-bit ints (non-ILP64 OpenBLAS); refuse sizes it would truncate.
blasint to_blas(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw Error(std::string("gemm: ") + what + " (" + std::to_string(v) +
                ") is outside [0, 2^31) supported by cblas_sgemm");
  return static_cast<blasint>(v);
}

} // namespace

void gemm(float* c, const float* a, const float* b, int64_t m, int64_t n, int64_t k,
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

void gemm_batched(float* c, const float* a, const float* b, int64_t batch, int64_t m, int64_t n,
                  int64_t k, bool transpose_a, bool transpose_b, int64_t stride_a,
                  int64_t stride_b, int64_t stride_c, float alpha, float beta) {
  // Serial and in batch order, so stride_c = 0 with beta = 1 is a well-defined accumulation.
  for (int64_t i = 0; i < batch; ++i)
    gemm(c + i * stride_c, a + i * stride_a, b + i * stride_b, m, n, k, transpose_a, transpose_b,
         alpha, beta);
}

// The CPU gains nothing from a fused epilogue (BLAS has none): the unfused kernels, in the
// unfused order, keep the results bitwise equal to the program before fusion.
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
