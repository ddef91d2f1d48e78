#include "kernels_test_util.h"
#include "megart/kernels.h"

#include <omp.h>

#include <cmath>
#include <string>

namespace {

using namespace megart::test;
namespace cpu = megart::cpu;

constexpr uint64_t kSeed = 1234;

TEST(KernelsDropout, MaskIsReproducibleAndScaled) {
  const int64_t n = 50000;
  const float rate = 0.3f;
  const Vec x = random_vec(n, 1, 0.5f, 1.5f); // never zero, so zeros in y are dropped elements
  Vec y1(n), y2(n);
  cpu::dropout_forward(y1.data(), x.data(), n, rate, kSeed, 0);
  cpu::dropout_forward(y2.data(), x.data(), n, rate, kSeed, 0);
  EXPECT_EQ(y1, y2);
  int64_t kept = 0;
  const uint64_t threshold = static_cast<uint64_t>(double(rate) * 4294967296.0);
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = cpu::dropout_random_bits(kSeed, i) >= threshold;
    EXPECT_EQ(y1[i], keep ? x[i] * (1.0f / (1.0f - rate)) : 0.0f) << i;
    kept += keep;
  }
  // Binomial(50000, 0.7): standard deviation ~100, so +-1000 never fails by chance.
  EXPECT_NEAR(static_cast<double>(kept), 0.7 * n, 1000.0);
}

TEST(KernelsDropout, OffsetSelectsTheSameGlobalElements) {
  const int64_t n = 1000;
  const Vec x = random_vec(n, 2, 0.5f, 1.5f);
  Vec whole(n), tail(n - 300);
  cpu::dropout_forward(whole.data(), x.data(), n, 0.5f, kSeed, 0);
  cpu::dropout_forward(tail.data(), x.data() + 300, n - 300, 0.5f, kSeed, 300);
  EXPECT_EQ(Vec(whole.begin() + 300, whole.end()), tail);
  Vec other(n);
  cpu::dropout_forward(other.data(), x.data(), n, 0.5f, kSeed + 1, 0);
  EXPECT_NE(whole, other);
}

TEST(KernelsDropout, RateZeroCopies) {
  const int64_t n = 77;
  const Vec x = random_vec(n, 3);
  Vec y(n), dx(n);
  cpu::dropout_forward(y.data(), x.data(), n, 0.0f, kSeed, 5);
  EXPECT_EQ(y, x);
  cpu::dropout_backward(dx.data(), x.data(), n, 0.0f, kSeed, 5);
  EXPECT_EQ(dx, x);
}

TEST(KernelsDropout, BackwardMatchesFiniteDifferencesOfForward) {
  const int64_t n = 300;
  const float rate = 0.25f;
  const uint64_t offset = 17;
  const Vec x = random_vec(n, 4), dy = random_vec(n, 5);
  Vec dx(n);
  cpu::dropout_backward(dx.data(), dy.data(), n, rate, kSeed, offset);
  // The reference forward applies the kernel's documented mask in double.
  const double keep_scale = 1.0 / (1.0 - rate);
  const uint64_t threshold = static_cast<uint64_t>(double(rate) * 4294967296.0);
  auto ref = [&](const DVec& v) {
    DVec y(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      y[i] = cpu::dropout_random_bits(kSeed, offset + i) >= threshold ? v[i] * keep_scale : 0.0;
    return y;
  };
  // Linear map: differences are exact to double rounding; the kernel rounds 1/(1-rate) to float.
  expect_close(dx, fd_grad(ref, to_double(x), to_double(dy)), 1e-6, "dropout backward");
}

TEST(KernelsDropout, IndependentOfThreadCountAndInPlace) {
  const int64_t n = 40000; // above the parallel threshold
  const Vec x = random_vec(n, 6);
  const int saved = omp_get_max_threads();
  Vec one(n), two = x;
  omp_set_num_threads(1);
  cpu::dropout_forward(one.data(), x.data(), n, 0.1f, kSeed, 9);
  omp_set_num_threads(2);
  cpu::dropout_forward(two.data(), two.data(), n, 0.1f, kSeed, 9);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
}

TEST(KernelsDropout, BadRateThrows) {
  Vec x(4, 1.0f), y(4);
  for (float rate : {-0.1f, 1.0f, 1.5f, NAN})
    EXPECT_THROW(cpu::dropout_forward(y.data(), x.data(), 4, rate, kSeed, 0), megart::Error)
        << rate;
}

} // namespace
