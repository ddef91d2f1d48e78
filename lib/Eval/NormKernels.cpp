// LayerNorm and RMSNorm over the last dimension, and their gradients from the closed forms
//   layer_norm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * w
//   rms_norm:   dx = rstd * (g - xhat * mean(g * xhat))
// with xhat the normalised input; dw = sum over rows of dy * xhat, db = sum of dy.
#include "megac/Eval/Kernels.h"

#include <cmath>

namespace megac::eval {

namespace {
struct RowStats {
  double mean, rstd;
};

RowStats layerNormStats(const double *x, int64_t h, double eps) {
  double mean = 0.0, var = 0.0;
  for (int64_t j = 0; j < h; ++j)
    mean += x[j];
  mean /= h;
  for (int64_t j = 0; j < h; ++j)
    var += (x[j] - mean) * (x[j] - mean);
  var /= h; // biased, as PyTorch's LayerNorm
  return {mean, 1.0 / std::sqrt(var + eps)};
}

double rmsNormRstd(const double *x, int64_t h, double eps) {
  double ms = 0.0;
  for (int64_t j = 0; j < h; ++j)
    ms += x[j] * x[j];
  return 1.0 / std::sqrt(ms / h + eps);
}
} // namespace

Tensor layerNorm(const Tensor &x, const Tensor &w, const Tensor &b, double eps) {
  Tensor y = Tensor::zeros(x.shape);
  int64_t h = x.lastDim(), rows = x.numel() / h;
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = x.data.data() + r * h;
    RowStats s = layerNormStats(xr, h, eps);
    for (int64_t j = 0; j < h; ++j)
      y.data[r * h + j] = (xr[j] - s.mean) * s.rstd * w.data[j] + b.data[j];
  }
  return y;
}

NormGrads layerNormGrad(const Tensor &dy, const Tensor &x, const Tensor &w, double eps) {
  NormGrads g{Tensor::zeros(x.shape), Tensor::zeros(w.shape), Tensor::zeros(w.shape)};
  int64_t h = x.lastDim(), rows = x.numel() / h;
  std::vector<double> xhat(h), gx(h);
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = x.data.data() + r * h, *dyr = dy.data.data() + r * h;
    RowStats s = layerNormStats(xr, h, eps);
    double meanG = 0.0, meanGX = 0.0;
    for (int64_t j = 0; j < h; ++j) {
      xhat[j] = (xr[j] - s.mean) * s.rstd;
      gx[j] = dyr[j] * w.data[j];
      meanG += gx[j];
      meanGX += gx[j] * xhat[j];
      g.weight.data[j] += dyr[j] * xhat[j];
      g.bias.data[j] += dyr[j];
    }
    meanG /= h;
    meanGX /= h;
    for (int64_t j = 0; j < h; ++j)
      g.input.data[r * h + j] = s.rstd * (gx[j] - meanG - xhat[j] * meanGX);
  }
  return g;
}

Tensor rmsNorm(const Tensor &x, const Tensor &w, double eps, double weightOffset) {
  Tensor y = Tensor::zeros(x.shape);
  int64_t h = x.lastDim(), rows = x.numel() / h;
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = x.data.data() + r * h;
    double rstd = rmsNormRstd(xr, h, eps);
    for (int64_t j = 0; j < h; ++j)
      y.data[r * h + j] = xr[j] * rstd * (w.data[j] + weightOffset);
  }
  return y;
}

NormGrads rmsNormGrad(const Tensor &dy, const Tensor &x, const Tensor &w, double eps, double weightOffset) {
  NormGrads g{Tensor::zeros(x.shape), Tensor::zeros(w.shape), Tensor()};
  int64_t h = x.lastDim(), rows = x.numel() / h;
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = x.data.data() + r * h, *dyr = dy.data.data() + r * h;
    double rstd = rmsNormRstd(xr, h, eps);
    double meanGX = 0.0;
    for (int64_t j = 0; j < h; ++j) {
      double xhat = xr[j] * rstd;
      meanGX += dyr[j] * (w.data[j] + weightOffset) * xhat;
      g.weight.data[j] += dyr[j] * xhat;
    }
    meanGX /= h;
    for (int64_t j = 0; j < h; ++j)
      g.input.data[r * h + j] = rstd * (dyr[j] * (w.data[j] + weightOffset) - xr[j] * rstd * meanGX);
  }
  return g;
}

} // namespace megac::eval
