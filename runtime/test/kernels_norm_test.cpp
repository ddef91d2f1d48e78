#include "kernels_test_util.h"
#include "megart/kernels.h"

#include <cmath>
#include <string>
#include <utility>

namespace {

using namespace megart::test;
namespace cpu = megart::cpu;

DVec ref_layer_norm(const DVec& x, const DVec& w, const DVec& b, int64_t rows, int64_t dim,
                    double eps) {
  DVec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < dim; ++j)
      mean += x[r * dim + j];
    mean /= dim;
    for (int64_t j = 0; j < dim; ++j)
      var += (x[r * dim + j] - mean) * (x[r * dim + j] - mean);
    var /= dim;
    for (int64_t j = 0; j < dim; ++j)
      y[r * dim + j] = (x[r * dim + j] - mean) / std::sqrt(var + eps) * w[j] + b[j];
  }
  return y;
}

DVec ref_rms_norm(const DVec& x, const DVec& w, int64_t rows, int64_t dim, double eps) {
  DVec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0.0;
    for (int64_t j = 0; j < dim; ++j)
      ms += x[r * dim + j] * x[r * dim + j];
    ms /= dim;
    for (int64_t j = 0; j < dim; ++j)
      y[r * dim + j] = x[r * dim + j] / std::sqrt(ms + eps) * w[j];
  }
  return y;
}

// (rows, dim): single element rows, odd sizes, and more rows than one reduction block (32).
const std::pair<int64_t, int64_t> kShapes[] = {{1, 1}, {3, 7}, {5, 64}, {33, 129}, {70, 3}};
constexpr float kEps = 1e-5f;

// Backward tolerance: the kernel forms dx = rstd (g - mean(g) - xhat mean(g xhat)) in float from
// float inputs, a few roundings of 6e-8 on terms of the size of the gradient, so 2e-5 relative
// (to the rms floor of expect_close) leaves a wide margin while catching any formula error,
// which shows up at the 1e-2 level. dw/db are sums over rows formed in double.
constexpr double kBackwardRtol = 2e-5;

TEST(KernelsNorm, LayerNormForward) {
  for (const auto& [rows, dim] : kShapes) {
    const Vec x = random_vec(rows * dim, 1, -2.0f, 3.0f), w = random_vec(dim, 2),
              b = random_vec(dim, 3);
    Vec y(rows * dim);
    cpu::layer_norm_forward(y.data(), x.data(), w.data(), b.data(), rows, dim, kEps);
    expect_close(y, ref_layer_norm(to_double(x), to_double(w), to_double(b), rows, dim, kEps),
                 1e-5, "layer_norm " + std::to_string(rows) + "x" + std::to_string(dim));
  }
}

TEST(KernelsNorm, LayerNormBackwardMatchesFiniteDifferences) {
  for (const auto& [rows, dim] : kShapes) {
    if (dim == 1)
      continue; // x - mean is identically 0: the gradient wrt x is 0 but FD sees only rounding
    const std::string shape = std::to_string(rows) + "x" + std::to_string(dim);
    const Vec x = random_vec(rows * dim, 4, -2.0f, 3.0f), w = random_vec(dim, 5),
              b = random_vec(dim, 6), dy = random_vec(rows * dim, 7);
    Vec dx(rows * dim), dw(dim), db(dim);
    cpu::layer_norm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                             rows, dim, kEps);
    const DVec xd = to_double(x), wd = to_double(w), bd = to_double(b), dyd = to_double(dy);
    expect_close(dx,
                 fd_grad([&](const DVec& v) { return ref_layer_norm(v, wd, bd, rows, dim, kEps); },
                         xd, dyd),
                 kBackwardRtol, "layer_norm dx " + shape);
    expect_close(dw,
                 fd_grad([&](const DVec& v) { return ref_layer_norm(xd, v, bd, rows, dim, kEps); },
                         wd, dyd),
                 kBackwardRtol, "layer_norm dw " + shape);
    expect_close(db,
                 fd_grad([&](const DVec& v) { return ref_layer_norm(xd, wd, v, rows, dim, kEps); },
                         bd, dyd),
                 kBackwardRtol, "layer_norm db " + shape);
  }
}

TEST(KernelsNorm, RmsNormForward) {
  for (const auto& [rows, dim] : kShapes) {
    const Vec x = random_vec(rows * dim, 8, -2.0f, 3.0f), w = random_vec(dim, 9);
    Vec y(rows * dim);
    cpu::rms_norm_forward(y.data(), x.data(), w.data(), rows, dim, kEps);
    expect_close(y, ref_rms_norm(to_double(x), to_double(w), rows, dim, kEps), 1e-5,
                 "rms_norm " + std::to_string(rows) + "x" + std::to_string(dim));
  }
}

TEST(KernelsNorm, RmsNormBackwardMatchesFiniteDifferences) {
  for (const auto& [rows, dim] : kShapes) {
    if (dim == 1)
      continue; // x / |x| is flat: the true dx is O(eps) and float cancellation dominates it
    const std::string shape = std::to_string(rows) + "x" + std::to_string(dim);
    const Vec x = random_vec(rows * dim, 10, -2.0f, 3.0f), w = random_vec(dim, 11),
              dy = random_vec(rows * dim, 12);
    Vec dx(rows * dim), dw(dim);
    cpu::rms_norm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rows, dim, kEps);
    const DVec xd = to_double(x), wd = to_double(w), dyd = to_double(dy);
    expect_close(dx,
                 fd_grad([&](const DVec& v) { return ref_rms_norm(v, wd, rows, dim, kEps); }, xd,
                         dyd),
                 kBackwardRtol, "rms_norm dx " + shape);
    expect_close(dw,
                 fd_grad([&](const DVec& v) { return ref_rms_norm(xd, v, rows, dim, kEps); }, wd,
                         dyd),
                 kBackwardRtol, "rms_norm dw " + shape);
  }
}

// Gemma's (1 + w): an offset of 1 on w is, bit for bit, the plain norm of the weights w + 1
// (the same float sum, then the same products); the weight gradient is the plain one's.
TEST(KernelsNorm, RmsNormWeightOffsetScalesByWPlusOffset) {
  for (const auto& [rows, dim] : kShapes) {
    const std::string shape = std::to_string(rows) + "x" + std::to_string(dim);
    const Vec x = random_vec(rows * dim, 13, -2.0f, 3.0f), w = random_vec(dim, 14, -0.5f, 0.5f),
              dy = random_vec(rows * dim, 15);
    Vec shifted(w);
    for (float& v : shifted)
      v += 1.0f;
    Vec y(rows * dim), want(rows * dim), dx(rows * dim), dw(dim), want_dx(rows * dim), want_dw(dim);
    cpu::rms_norm_forward(y.data(), x.data(), w.data(), rows, dim, kEps, 1.0f);
    cpu::rms_norm_forward(want.data(), x.data(), shifted.data(), rows, dim, kEps);
    EXPECT_EQ(y, want) << "rms_norm offset 1 " << shape;
    cpu::rms_norm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rows, dim, kEps, 1.0f);
    cpu::rms_norm_backward(want_dx.data(), want_dw.data(), dy.data(), x.data(), shifted.data(), rows, dim, kEps);
    EXPECT_EQ(dx, want_dx) << "rms_norm dx offset 1 " << shape;
    EXPECT_EQ(dw, want_dw) << "rms_norm dw offset 1 " << shape;
    cpu::rms_norm_forward(want.data(), x.data(), w.data(), rows, dim, kEps);
    EXPECT_NE(y, want) << "the offset changes the output " << shape;
  }
}

} // namespace
