// LayerNorm and RMSNorm. Row statistics in double; per-element math in float.
// Backward passes recompute the statistics from x (cheaper than saving them on CPU) and form
// dw/db from fixed row blocks so the sums do not depend on the thread count.
#include "kernels_detail.h"
#include "megart/kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace megart::cpu {
namespace {

struct RowStats {
  double mean;
  double rstd;
};

// Two-pass mean / biased variance in double (no cancellation from E[x^2] - E[x]^2).
RowStats layer_norm_stats(const float* x, int64_t dim, float eps) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < dim; ++j)
    s += x[j];
  const double mean = s / static_cast<double>(dim);
  double v = 0.0;
#pragma omp simd reduction(+ : v)
  for (int64_t j = 0; j < dim; ++j) {
    const double d = x[j] - mean;
    v += d * d;
  }
  const double var = v / static_cast<double>(dim);
  return {mean, 1.0 / std::sqrt(var + static_cast<double>(eps))};
}

double rms_rstd(const float* x, int64_t dim, float eps) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < dim; ++j)
    s += static_cast<double>(x[j]) * x[j];
  return 1.0 / std::sqrt(s / static_cast<double>(dim) + static_cast<double>(eps));
}

} // namespace

void layer_norm_forward(float* y, const float* x, const float* w, const float* b, int64_t rows,
                        int64_t dim, float eps) {
#pragma omp parallel for schedule(static) if (rows * dim > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const RowStats st = layer_norm_stats(xr, dim, eps);
    const float mean = static_cast<float>(st.mean), rstd = static_cast<float>(st.rstd);
    for (int64_t j = 0; j < dim; ++j)
      yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
  }
}

void layer_norm_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                         const float* w, int64_t rows, int64_t dim, float eps) {
  // With xhat = (x - mean) * rstd and g = dy * w:
  //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dw = sum dy * xhat,  db = sum dy.
  const int64_t blocks = detail::row_blocks(rows);
  std::vector<double> pdw(static_cast<size_t>(blocks * dim), 0.0);
  std::vector<double> pdb(static_cast<size_t>(blocks * dim), 0.0);
#pragma omp parallel if (rows * dim > (1 << 14))
  {
    std::vector<float> xhat(static_cast<size_t>(dim));
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      double* bw = pdw.data() + blk * dim;
      double* bb = pdb.data() + blk * dim;
      const int64_t r1 = std::min(rows, (blk + 1) * detail::kRowBlock);
      for (int64_t r = blk * detail::kRowBlock; r < r1; ++r) {
        const float* xr = x + r * dim;
        const float* dyr = dy + r * dim;
        float* dxr = dx + r * dim;
        const RowStats st = layer_norm_stats(xr, dim, eps);
        const float mean = static_cast<float>(st.mean), rstd = static_cast<float>(st.rstd);
        double sg = 0.0, sgx = 0.0;
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t j = 0; j < dim; ++j) {
          const float xh = (xr[j] - mean) * rstd;
          xhat[j] = xh;
          const float g = dyr[j] * w[j];
          sg += g;
          sgx += static_cast<double>(g) * xh;
        }
        const float mg = static_cast<float>(sg / dim), mgx = static_cast<float>(sgx / dim);
        for (int64_t j = 0; j < dim; ++j) {
          dxr[j] = rstd * (dyr[j] * w[j] - mg - xhat[j] * mgx);
          bw[j] += static_cast<double>(dyr[j] * xhat[j]);
          bb[j] += static_cast<double>(dyr[j]);
        }
      }
    }
  }
  detail::sum_row_blocks(dw, pdw.data(), blocks, dim);
  detail::sum_row_blocks(db, pdb.data(), blocks, dim);
}

void rms_norm_forward(float* y, const float* x, const float* w, int64_t rows, int64_t dim,
                      float eps) {
#pragma omp parallel for schedule(static) if (rows * dim > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float rstd = static_cast<float>(rms_rstd(xr, dim, eps));
    // Same order as HF: w * (x * rstd).
    for (int64_t j = 0; j < dim; ++j)
      yr[j] = w[j] * (xr[j] * rstd);
  }
}

void rms_norm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                       int64_t rows, int64_t dim, float eps) {
  // With xhat = x * rstd and g = dy * w:  dx = rstd * (g - xhat * mean(g * xhat)),
  // dw = sum dy * xhat.
  const int64_t blocks = detail::row_blocks(rows);
  std::vector<double> pdw(static_cast<size_t>(blocks * dim), 0.0);
#pragma omp parallel for schedule(static) if (rows * dim > (1 << 14))
  for (int64_t blk = 0; blk < blocks; ++blk) {
    double* bw = pdw.data() + blk * dim;
    const int64_t r1 = std::min(rows, (blk + 1) * detail::kRowBlock);
    for (int64_t r = blk * detail::kRowBlock; r < r1; ++r) {
      const float* xr = x + r * dim;
      const float* dyr = dy + r * dim;
      float* dxr = dx + r * dim;
      const float rstd = static_cast<float>(rms_rstd(xr, dim, eps));
      double sgx = 0.0;
#pragma omp simd reduction(+ : sgx)
      for (int64_t j = 0; j < dim; ++j)
        sgx += static_cast<double>(dyr[j] * w[j]) * (xr[j] * rstd);
      const float mgx = static_cast<float>(sgx / dim);
      for (int64_t j = 0; j < dim; ++j) {
        const float xh = xr[j] * rstd;
        dxr[j] = rstd * (dyr[j] * w[j] - xh * mgx);
        bw[j] += static_cast<double>(dyr[j] * xh);
      }
    }
  }
  detail::sum_row_blocks(dw, pdw.data(), blocks, dim);
}

} // namespace megart::cpu
