// LayerNorm and RMSNorm. Row statistics in double; per-element math in float.
// Backward passes recompute the statistics from x (cheaper than saving them on CPU) and form
// dw/db from fixed row blocks so the sums do not depend on the thread count.
// Templates over the activation storage type (kernels.h): loads widen, stores round once.
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
template <typename A> RowStats layer_norm_stats(const A* x, int64_t dim, float eps) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < dim; ++j)
    s += to_float(x[j]);
  const double mean = s / static_cast<double>(dim);
  double v = 0.0;
#pragma omp simd reduction(+ : v)
  for (int64_t j = 0; j < dim; ++j) {
    const double d = to_float(x[j]) - mean;
    v += d * d;
  }
  const double var = v / static_cast<double>(dim);
  return {mean, 1.0 / std::sqrt(var + static_cast<double>(eps))};
}

template <typename A> double rms_rstd(const A* x, int64_t dim, float eps) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < dim; ++j) {
    const float v = to_float(x[j]);
    s += static_cast<double>(v) * v;
  }
  return 1.0 / std::sqrt(s / static_cast<double>(dim) + static_cast<double>(eps));
}

} // namespace

template <typename A>
void layer_norm_forward(A* y, const A* x, const float* w, const float* b, int64_t rows, int64_t dim,
                        float eps) {
#pragma omp parallel for schedule(static) if (rows * dim > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const A* xr = x + r * dim;
    A* yr = y + r * dim;
    const RowStats st = layer_norm_stats(xr, dim, eps);
    const float mean = static_cast<float>(st.mean), rstd = static_cast<float>(st.rstd);
    for (int64_t j = 0; j < dim; ++j)
      yr[j] = from_float<A>((to_float(xr[j]) - mean) * rstd * w[j] + b[j]);
  }
}

template <typename A>
void layer_norm_backward(A* dx, float* dw, float* db, const A* dy, const A* x, const float* w,
                         int64_t rows, int64_t dim, float eps) {
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
        const A* xr = x + r * dim;
        const A* dyr = dy + r * dim;
        A* dxr = dx + r * dim;
        const RowStats st = layer_norm_stats(xr, dim, eps);
        const float mean = static_cast<float>(st.mean), rstd = static_cast<float>(st.rstd);
        double sg = 0.0, sgx = 0.0;
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t j = 0; j < dim; ++j) {
          const float xh = (to_float(xr[j]) - mean) * rstd;
          xhat[j] = xh;
          const float g = to_float(dyr[j]) * w[j];
          sg += g;
          sgx += static_cast<double>(g) * xh;
        }
        const float mg = static_cast<float>(sg / dim), mgx = static_cast<float>(sgx / dim);
        for (int64_t j = 0; j < dim; ++j) {
          const float d = to_float(dyr[j]);
          dxr[j] = from_float<A>(rstd * (d * w[j] - mg - xhat[j] * mgx));
          bw[j] += static_cast<double>(d * xhat[j]);
          bb[j] += static_cast<double>(d);
        }
      }
    }
  }
  detail::sum_row_blocks(dw, pdw.data(), blocks, dim);
  detail::sum_row_blocks(db, pdb.data(), blocks, dim);
}

// The norm's scale of column j: w[j], or w[j] + offset (an offset of 0 leaves w's bits, -0 included).
static inline float norm_scale(const float* w, int64_t j, float offset) {
  return offset == 0.0f ? w[j] : w[j] + offset;
}

template <typename A>
void rms_norm_forward(A* y, const A* x, const float* w, int64_t rows, int64_t dim, float eps,
                      float weight_offset) {
#pragma omp parallel for schedule(static) if (rows * dim > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const A* xr = x + r * dim;
    A* yr = y + r * dim;
    const float rstd = static_cast<float>(rms_rstd(xr, dim, eps));
    // Same order as HF: w * (x * rstd) (Gemma: (x * rstd) * (1 + w), the same product).
    for (int64_t j = 0; j < dim; ++j)
      yr[j] = from_float<A>(norm_scale(w, j, weight_offset) * (to_float(xr[j]) * rstd));
  }
}

template <typename A>
void rms_norm_backward(A* dx, float* dw, const A* dy, const A* x, const float* w, int64_t rows,
                       int64_t dim, float eps, float weight_offset) {
  // With xhat = x * rstd and g = dy * (w + offset):  dx = rstd * (g - xhat * mean(g * xhat)),
  // dw = sum dy * xhat.
  const int64_t blocks = detail::row_blocks(rows);
  std::vector<double> pdw(static_cast<size_t>(blocks * dim), 0.0);
#pragma omp parallel for schedule(static) if (rows * dim > (1 << 14))
  for (int64_t blk = 0; blk < blocks; ++blk) {
    double* bw = pdw.data() + blk * dim;
    const int64_t r1 = std::min(rows, (blk + 1) * detail::kRowBlock);
    for (int64_t r = blk * detail::kRowBlock; r < r1; ++r) {
      const A* xr = x + r * dim;
      const A* dyr = dy + r * dim;
      A* dxr = dx + r * dim;
      const float rstd = static_cast<float>(rms_rstd(xr, dim, eps));
      double sgx = 0.0;
#pragma omp simd reduction(+ : sgx)
      for (int64_t j = 0; j < dim; ++j)
        sgx += static_cast<double>(to_float(dyr[j]) * norm_scale(w, j, weight_offset)) *
               (to_float(xr[j]) * rstd);
      const float mgx = static_cast<float>(sgx / dim);
      for (int64_t j = 0; j < dim; ++j) {
        const float xh = to_float(xr[j]) * rstd, d = to_float(dyr[j]);
        dxr[j] = from_float<A>(rstd * (d * norm_scale(w, j, weight_offset) - xh * mgx));
        bw[j] += static_cast<double>(d * xh);
      }
    }
  }
  detail::sum_row_blocks(dw, pdw.data(), blocks, dim);
}

void layer_norm_forward(float* y, const float* x, const float* w, const float* b, int64_t rows,
                        int64_t dim, float eps) {
  layer_norm_forward<float>(y, x, w, b, rows, dim, eps);
}
void layer_norm_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                         const float* w, int64_t rows, int64_t dim, float eps) {
  layer_norm_backward<float>(dx, dw, db, dy, x, w, rows, dim, eps);
}
void rms_norm_forward(float* y, const float* x, const float* w, int64_t rows, int64_t dim,
                      float eps, float weight_offset) {
  rms_norm_forward<float>(y, x, w, rows, dim, eps, weight_offset);
}
void rms_norm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                       int64_t rows, int64_t dim, float eps, float weight_offset) {
  rms_norm_backward<float>(dx, dw, dy, x, w, rows, dim, eps, weight_offset);
}

#define MEGART_NORMS(A)                                                                            \
  template void layer_norm_forward<A>(A*, const A*, const float*, const float*, int64_t, int64_t,  \
                                      float);                                                      \
  template void layer_norm_backward<A>(A*, float*, float*, const A*, const A*, const float*,       \
                                       int64_t, int64_t, float);                                   \
  template void rms_norm_forward<A>(A*, const A*, const float*, int64_t, int64_t, float, float);   \
  template void rms_norm_backward<A>(A*, float*, const A*, const A*, const float*, int64_t,        \
                                     int64_t, float, float);
MEGART_NORMS(bf16_t)
MEGART_NORMS(fp16_t)

} // namespace megart::cpu
