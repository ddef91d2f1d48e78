// LayerNorm and RMSNorm, one block per row. Row statistics in double (block reductions in a
// fixed shape), per-element math in float with the CPU kernels' expressions. The backward
// kernels write dx and each row's statistics; dw / db are then summed over fixed row blocks in
// double and the blocks added in order (detail::sum_row_blocks): deterministic, no atomics.
#include "cuda_detail.cuh"

namespace megart::cuda {
namespace {

using detail::block_sum;

struct RowStats {
  float mean;
  float rstd;
};

// Two-pass mean and biased variance in double, as the CPU (no E[x^2] - E[x]^2 cancellation).
__device__ RowStats layer_norm_stats(const float *xr, int64_t dim, float eps) {
  double s = 0.0;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
    s += xr[j];
  const double mean = block_sum(s) / static_cast<double>(dim);
  double v = 0.0;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    const double d = xr[j] - mean;
    v += d * d;
  }
  const double var = block_sum(v) / static_cast<double>(dim);
  return {static_cast<float>(mean), static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)))};
}

__device__ float rms_rstd(const float *xr, int64_t dim, float eps) {
  double s = 0.0;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
    s += static_cast<double>(xr[j]) * xr[j];
  s = block_sum(s);
  return static_cast<float>(1.0 / sqrt(s / static_cast<double>(dim) + static_cast<double>(eps)));
}

__global__ void layer_norm_forward_kernel(float *y, const float *x, const float *w, const float *b, int64_t rows,
                                          int64_t dim, float eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * dim;
    float *yr = y + r * dim;
    const RowStats st = layer_norm_stats(xr, dim, eps);
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      yr[j] = (xr[j] - st.mean) * st.rstd * w[j] + b[j];
  }
}

// With xhat = (x - mean) * rstd and g = dy * w:  dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
__global__ void layer_norm_backward_kernel(float *dx, float *row_mean, float *row_rstd, const float *dy,
                                           const float *x, const float *w, int64_t rows, int64_t dim, float eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * dim;
    const float *dyr = dy + r * dim;
    float *dxr = dx + r * dim;
    const RowStats st = layer_norm_stats(xr, dim, eps);
    double sg = 0.0, sgx = 0.0;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      const float xh = (xr[j] - st.mean) * st.rstd;
      const float g = dyr[j] * w[j];
      sg += g;
      sgx += static_cast<double>(g) * xh;
    }
    sg = block_sum(sg);
    sgx = block_sum(sgx);
    const float mg = static_cast<float>(sg / dim), mgx = static_cast<float>(sgx / dim);
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      const float xh = (xr[j] - st.mean) * st.rstd;
      dxr[j] = st.rstd * (dyr[j] * w[j] - mg - xh * mgx);
    }
    if (threadIdx.x == 0) {
      row_mean[r] = st.mean;
      row_rstd[r] = st.rstd;
    }
  }
}

// The norm's scale of column j: w[j], or w[j] + offset (Gemma's 1 + w; an offset of 0 keeps w's bits).
__device__ __forceinline__ float norm_scale(const float *w, int64_t j, float offset) {
  return offset == 0.0f ? w[j] : w[j] + offset;
}

// With xhat = x * rstd and g = dy * (w + offset):  dx = rstd * (g - xhat * mean(g * xhat)).
__global__ void rms_norm_backward_kernel(float *dx, float *row_rstd, const float *dy, const float *x, const float *w,
                                         int64_t rows, int64_t dim, float eps, float offset) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * dim;
    const float *dyr = dy + r * dim;
    float *dxr = dx + r * dim;
    const float rstd = rms_rstd(xr, dim, eps);
    double sgx = 0.0;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      sgx += static_cast<double>(dyr[j] * norm_scale(w, j, offset)) * (xr[j] * rstd);
    sgx = block_sum(sgx);
    const float mgx = static_cast<float>(sgx / dim);
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      const float xh = xr[j] * rstd;
      dxr[j] = rstd * (dyr[j] * norm_scale(w, j, offset) - xh * mgx);
    }
    if (threadIdx.x == 0)
      row_rstd[r] = rstd;
  }
}

__global__ void rms_norm_forward_kernel(float *y, const float *x, const float *w, int64_t rows, int64_t dim,
                                        float eps, float offset) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * dim;
    float *yr = y + r * dim;
    const float rstd = rms_rstd(xr, dim, eps);
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      yr[j] = norm_scale(w, j, offset) * (xr[j] * rstd); // HF's order: w * (x * rstd)
  }
}

// Per row block and column: sum of dy * xhat (and of dy when pdb is set) in double, in row
// order. xhat = (x - mean) * rstd, or x * rstd when mean is null (RMSNorm).
__global__ void norm_weight_partials_kernel(double *pdw, double *pdb, const float *dy, const float *x,
                                            const float *row_mean, const float *row_rstd, int64_t rows,
                                            int64_t dim) {
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * detail::kRowBlock;
  const int64_t r1 = min(rows, r0 + detail::kRowBlock);
  for (int64_t j = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < dim;
       j += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    double sw = 0.0, sb = 0.0;
    for (int64_t r = r0; r < r1; ++r) {
      const float d = dy[r * dim + j];
      const float xh = row_mean ? (x[r * dim + j] - row_mean[r]) * row_rstd[r] : x[r * dim + j] * row_rstd[r];
      sw += static_cast<double>(d * xh);
      sb += static_cast<double>(d);
    }
    pdw[blockIdx.x * dim + j] = sw;
    if (pdb)
      pdb[blockIdx.x * dim + j] = sb;
  }
}

void check_shape(const char *kernel, int64_t rows, int64_t dim) {
  detail::require(rows >= 0 && dim >= 0, std::string(kernel) + ": negative shape [" + std::to_string(rows) + ", " +
                                             std::to_string(dim) + "]");
}

// Workspace of a backward pass: double partials first (alignment), then per-row floats.
struct NormScratch {
  double *pdw, *pdb;
  float *mean, *rstd;
};

NormScratch norm_scratch(int64_t rows, int64_t dim, bool bias) {
  const int64_t blocks = detail::row_block_count(rows);
  const size_t partial = detail::aligned_bytes(sizeof(double) * blocks * dim);
  const size_t per_row = detail::aligned_bytes(sizeof(float) * rows);
  char *base = static_cast<char *>(detail::workspace(partial * 2 + per_row * 2));
  return {reinterpret_cast<double *>(base), bias ? reinterpret_cast<double *>(base + partial) : nullptr,
          reinterpret_cast<float *>(base + 2 * partial), reinterpret_cast<float *>(base + 2 * partial + per_row)};
}

} // namespace

void layer_norm_forward(float *y, const float *x, const float *w, const float *b, int64_t rows, int64_t dim,
                        float eps) {
  check_shape("layer_norm_forward", rows, dim);
  if (rows == 0 || dim == 0)
    return;
  layer_norm_forward_kernel<<<detail::row_blocks(rows), detail::kThreads, 0, compute_stream()>>>(y, x, w, b, rows,
                                                                                                 dim, eps);
  detail::check_launch("layer_norm_forward");
}

void layer_norm_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                         int64_t rows, int64_t dim, float eps) {
  check_shape("layer_norm_backward", rows, dim);
  if (dim == 0)
    return;
  if (rows == 0) { // sums over no rows
    zero_buffer(dw, sizeof(float) * dim);
    zero_buffer(db, sizeof(float) * dim);
    return;
  }
  const NormScratch s = norm_scratch(rows, dim, true);
  cudaStream_t stream = compute_stream();
  layer_norm_backward_kernel<<<detail::row_blocks(rows), detail::kThreads, 0, stream>>>(dx, s.mean, s.rstd, dy, x, w,
                                                                                        rows, dim, eps);
  detail::check_launch("layer_norm_backward");
  norm_weight_partials_kernel<<<detail::partials_grid(rows, dim), detail::kThreads, 0, stream>>>(
      s.pdw, s.pdb, dy, x, s.mean, s.rstd, rows, dim);
  detail::check_launch("layer_norm_backward (dw, db)");
  const int64_t blocks = detail::row_block_count(rows);
  detail::sum_row_blocks(dw, s.pdw, blocks, dim);
  detail::sum_row_blocks(db, s.pdb, blocks, dim);
}

void rms_norm_forward(float *y, const float *x, const float *w, int64_t rows, int64_t dim, float eps,
                      float weight_offset) {
  check_shape("rms_norm_forward", rows, dim);
  if (rows == 0 || dim == 0)
    return;
  rms_norm_forward_kernel<<<detail::row_blocks(rows), detail::kThreads, 0, compute_stream()>>>(y, x, w, rows, dim,
                                                                                               eps, weight_offset);
  detail::check_launch("rms_norm_forward");
}

void rms_norm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int64_t rows,
                       int64_t dim, float eps, float weight_offset) {
  check_shape("rms_norm_backward", rows, dim);
  if (dim == 0)
    return;
  if (rows == 0) {
    zero_buffer(dw, sizeof(float) * dim);
    return;
  }
  const NormScratch s = norm_scratch(rows, dim, false);
  cudaStream_t stream = compute_stream();
  rms_norm_backward_kernel<<<detail::row_blocks(rows), detail::kThreads, 0, stream>>>(dx, s.rstd, dy, x, w, rows, dim,
                                                                                      eps, weight_offset);
  detail::check_launch("rms_norm_backward");
  norm_weight_partials_kernel<<<detail::partials_grid(rows, dim), detail::kThreads, 0, stream>>>(
      s.pdw, nullptr, dy, x, nullptr, s.rstd, rows, dim);
  detail::check_launch("rms_norm_backward (dw)");
  detail::sum_row_blocks(dw, s.pdw, detail::row_block_count(rows), dim);
}

} // namespace megart::cuda
