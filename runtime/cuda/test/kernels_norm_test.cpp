// LayerNorm and RMSNorm, forward and backward, against the CPU kernels.
//
// Tolerances. Forward: both sides form the row statistics in double and round them to float,
// then apply the same float formula; only FMA contraction and (rarely) a last-bit difference in
// the rounded statistics differ, a few ulp of outputs of size <= ~10: 1e-5 relative + 2e-6
// absolute. dx: the same float formula with a cancellation (g - mean(g) - xhat mean(g xhat));
// the difference is a few ulp of the terms (size <= ~3) times rstd, so 1e-5 relative + 5e-6 rstd
// absolute (rstd is large only for rows of one element, where RMSNorm's dx cancels to ~0). dw / db: sums over up to 70 rows of float products, summed in double in the
// same row blocks as the CPU; per-term differences are at most an ulp of a term of size <= ~3,
// so 1e-5 relative + 2e-5 absolute. Any formula error shows at the 1e-2 level.
#include "cuda_test_util.h"

#include "megart/kernels.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace megart::cuda::test {
namespace {

using CudaNorm = CudaTest;

// (rows, dim): single elements, odd sizes, rows beyond one row block (32), dim beyond one block
// (256) and not a multiple of it.
const std::pair<int64_t, int64_t> kShapes[] = {{1, 1}, {3, 7}, {5, 64}, {33, 129}, {70, 3}, {40, 1000}, {2, 3001}};
constexpr float kEps = 1e-5f;

std::string shape(int64_t rows, int64_t dim) { return std::to_string(rows) + "x" + std::to_string(dim); }

// The largest 1 / sqrt(var + eps) (or mean square, uncentered) over the rows, at least 1: dx's
// rounding error scales with it.
float max_rstd(const std::vector<float> &x, int64_t rows, int64_t dim, bool centered) {
  double largest = 1.0;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, var = 0.0;
    if (centered) {
      for (int64_t j = 0; j < dim; ++j)
        mean += x[r * dim + j];
      mean /= dim;
    }
    for (int64_t j = 0; j < dim; ++j)
      var += (x[r * dim + j] - mean) * (x[r * dim + j] - mean);
    largest = std::max(largest, 1.0 / std::sqrt(var / dim + kEps));
  }
  return static_cast<float>(largest);
}

TEST_F(CudaNorm, LayerNormForward) {
  for (const auto &[rows, dim] : kShapes) {
    const auto x = random_floats(rows * dim, 31, -2.0f, 3.0f), w = random_floats(dim, 32), b = random_floats(dim, 33);
    std::vector<float> want(x.size());
    megart::cpu::layer_norm_forward(want.data(), x.data(), w.data(), b.data(), rows, dim, kEps);
    const DeviceArray<float> dx(x), dw(w), db(b);
    DeviceArray<float> y(x.size());
    layer_norm_forward(y.data(), dx.data(), dw.data(), db.data(), rows, dim, kEps);
    expect_near_all(y.get(), want, 1e-5f, 2e-6f, "layer_norm_forward " + shape(rows, dim));
  }
}

TEST_F(CudaNorm, LayerNormBackward) {
  for (const auto &[rows, dim] : kShapes) {
    const auto x = random_floats(rows * dim, 34, -2.0f, 3.0f), w = random_floats(dim, 35),
               dy = random_floats(rows * dim, 36);
    std::vector<float> want_dx(x.size()), want_dw(dim), want_db(dim);
    megart::cpu::layer_norm_backward(want_dx.data(), want_dw.data(), want_db.data(), dy.data(), x.data(), w.data(),
                                     rows, dim, kEps);
    const DeviceArray<float> dx_in(x), dw_in(w), ddy(dy);
    // Outputs start as garbage: the kernel must overwrite dw / db, not accumulate into them.
    DeviceArray<float> dx(x.size()), dw(random_floats(dim, 37)), db(random_floats(dim, 38));
    layer_norm_backward(dx.data(), dw.data(), db.data(), ddy.data(), dx_in.data(), dw_in.data(), rows, dim, kEps);
    expect_near_all(dx.get(), want_dx, 1e-5f, 5e-6f * max_rstd(x, rows, dim, true),
                    "layer_norm_backward dx " + shape(rows, dim));
    expect_near_all(dw.get(), want_dw, 1e-5f, 2e-5f, "layer_norm_backward dw " + shape(rows, dim));
    expect_near_all(db.get(), want_db, 1e-5f, 2e-5f, "layer_norm_backward db " + shape(rows, dim));
  }
}

TEST_F(CudaNorm, RmsNormForward) {
  for (const auto &[rows, dim] : kShapes) {
    const auto x = random_floats(rows * dim, 41, -2.0f, 3.0f), w = random_floats(dim, 42);
    std::vector<float> want(x.size());
    megart::cpu::rms_norm_forward(want.data(), x.data(), w.data(), rows, dim, kEps);
    const DeviceArray<float> dx(x), dw(w);
    DeviceArray<float> y(x.size());
    rms_norm_forward(y.data(), dx.data(), dw.data(), rows, dim, kEps);
    expect_near_all(y.get(), want, 1e-5f, 2e-6f, "rms_norm_forward " + shape(rows, dim));
  }
}

TEST_F(CudaNorm, RmsNormBackward) {
  for (const auto &[rows, dim] : kShapes) {
    const auto x = random_floats(rows * dim, 43, -2.0f, 3.0f), w = random_floats(dim, 44),
               dy = random_floats(rows * dim, 45);
    std::vector<float> want_dx(x.size()), want_dw(dim);
    megart::cpu::rms_norm_backward(want_dx.data(), want_dw.data(), dy.data(), x.data(), w.data(), rows, dim, kEps);
    const DeviceArray<float> dx_in(x), dw_in(w), ddy(dy);
    DeviceArray<float> dx(x.size()), dw(random_floats(dim, 46));
    rms_norm_backward(dx.data(), dw.data(), ddy.data(), dx_in.data(), dw_in.data(), rows, dim, kEps);
    expect_near_all(dx.get(), want_dx, 1e-5f, 5e-6f * max_rstd(x, rows, dim, false),
                    "rms_norm_backward dx " + shape(rows, dim));
    expect_near_all(dw.get(), want_dw, 1e-5f, 2e-5f, "rms_norm_backward dw " + shape(rows, dim));
  }
}

// Gemma's (1 + w): the offset as the CPU applies it, forward and backward.
TEST_F(CudaNorm, RmsNormWeightOffset) {
  for (const auto &[rows, dim] : kShapes) {
    const auto x = random_floats(rows * dim, 50, -2.0f, 3.0f), w = random_floats(dim, 51),
               dy = random_floats(rows * dim, 52);
    std::vector<float> want(x.size()), want_dx(x.size()), want_dw(dim);
    megart::cpu::rms_norm_forward(want.data(), x.data(), w.data(), rows, dim, kEps, 1.0f);
    megart::cpu::rms_norm_backward(want_dx.data(), want_dw.data(), dy.data(), x.data(), w.data(), rows, dim, kEps,
                                   1.0f);
    const DeviceArray<float> dx_in(x), dw_in(w), ddy(dy);
    DeviceArray<float> y(x.size()), dx(x.size()), dw(dim);
    rms_norm_forward(y.data(), dx_in.data(), dw_in.data(), rows, dim, kEps, 1.0f);
    rms_norm_backward(dx.data(), dw.data(), ddy.data(), dx_in.data(), dw_in.data(), rows, dim, kEps, 1.0f);
    expect_near_all(y.get(), want, 1e-5f, 2e-6f, "rms_norm_forward offset 1 " + shape(rows, dim));
    expect_near_all(dx.get(), want_dx, 1e-5f, 5e-6f * max_rstd(x, rows, dim, false),
                    "rms_norm_backward dx offset 1 " + shape(rows, dim));
    expect_near_all(dw.get(), want_dw, 1e-5f, 2e-5f, "rms_norm_backward dw offset 1 " + shape(rows, dim));
  }
}

TEST_F(CudaNorm, BackwardIsDeterministic) {
  // Same inputs twice: bitwise the same dx, dw, db (no atomics, fixed reduction shapes).
  const int64_t rows = 70, dim = 1000;
  const DeviceArray<float> x(random_floats(rows * dim, 47)), w(random_floats(dim, 48)),
      dy(random_floats(rows * dim, 49));
  DeviceArray<float> dx(rows * dim), dw(dim), db(dim);
  layer_norm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), rows, dim, kEps);
  const auto dx1 = dx.get(), dw1 = dw.get(), db1 = db.get();
  layer_norm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), rows, dim, kEps);
  expect_near_all(dx.get(), dx1, 0.0f, 0.0f, "dx, second run");
  expect_near_all(dw.get(), dw1, 0.0f, 0.0f, "dw, second run");
  expect_near_all(db.get(), db1, 0.0f, 0.0f, "db, second run");
}

} // namespace
} // namespace megart::cuda::test
