// Shared helpers of the kernel tests: random inputs, tolerance checks against double references,
// and central finite differences.
#pragma once

#include "megart/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace megart::test {

using Vec = std::vector<float>;
using DVec = std::vector<double>;

// Uniform values in [lo, hi); the fixed seed keeps failures reproducible.
inline Vec random_vec(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Vec v(static_cast<size_t>(n));
  for (float& x : v)
    x = dist(gen);
  return v;
}

inline DVec to_double(const Vec& v) { return DVec(v.begin(), v.end()); }

inline double rms(const DVec& v) {
  double s = 0.0;
  for (double x : v)
    s += x * x;
  return v.empty() ? 0.0 : std::sqrt(s / static_cast<double>(v.size()));
}

// got[i] must be within rtol * (|want[i]| + rms(want)) of want[i]. The rms term is the floor for
// entries near zero: float kernels make errors relative to the size of the terms they add, not to
// a result that happens to cancel, and rms(want) stands for that size.
inline void expect_close(const Vec& got, const DVec& want, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double floor = rms(want);
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = rtol * (std::fabs(want[i]) + floor);
    if (!(std::fabs(got[i] - want[i]) <= tol) && reported++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i]
                    << " (tolerance " << tol << ")";
  }
}

// Gradient of L(x) = sum_i dy[i] * f(x)[i] with respect to x, by central differences in double.
// With step h = 1e-6 on inputs of size ~1, the truncation error is ~h^2 |f'''| ~ 1e-12 and the
// rounding error ~1e-16 |L| / h ~ 1e-10: the result is exact far below the float tolerances the
// kernels are held to, so it serves as the reference gradient.
inline DVec fd_grad(const std::function<DVec(const DVec&)>& f, DVec x, const DVec& dy,
                    double h = 1e-6) {
  DVec g(x.size());
  for (size_t j = 0; j < x.size(); ++j) {
    const double x0 = x[j];
    x[j] = x0 + h;
    const DVec fp = f(x);
    x[j] = x0 - h;
    const DVec fm = f(x);
    x[j] = x0;
    double d = 0.0;
    for (size_t i = 0; i < fp.size(); ++i)
      d += dy[i] * (fp[i] - fm[i]);
    g[j] = d / (2.0 * h);
  }
  return g;
}

} // namespace megart::test
