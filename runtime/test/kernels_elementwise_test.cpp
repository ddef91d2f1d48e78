#include "kernels_test_util.h"
#include "megart/kernels.h"

#include <omp.h>

#include <string>
#include <utility>

namespace {

using namespace megart::test;
namespace cpu = megart::cpu;

// (outer, inner): same-shape (outer 1), broadcast, a single column, and more rows than one
// reduction block (32) or than the parallel threshold.
const std::pair<int64_t, int64_t> kShapes[] = {{1, 1}, {1, 37}, {5, 7}, {33, 1}, {100, 13}, {300, 80}};

std::string name(int64_t outer, int64_t inner) {
  return std::to_string(outer) + "x" + std::to_string(inner);
}

TEST(KernelsElementwise, AddAndMulBroadcast) {
  for (const auto& [outer, inner] : kShapes) {
    const Vec a = random_vec(outer * inner, 1), b = random_vec(inner, 2);
    DVec sum(a.size()), prod(a.size());
    for (int64_t i = 0; i < outer; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        sum[i * inner + j] = double(a[i * inner + j]) + b[j];
        prod[i * inner + j] = double(a[i * inner + j]) * b[j];
      }
    Vec out(a.size());
    cpu::add(out.data(), a.data(), b.data(), outer, inner);
    // One float rounding per element: 1e-7 relative, checked at 1e-6.
    expect_close(out, sum, 1e-6, "add " + name(outer, inner));
    cpu::mul(out.data(), a.data(), b.data(), outer, inner);
    expect_close(out, prod, 1e-6, "mul " + name(outer, inner));
    Vec inplace = a;
    cpu::add(inplace.data(), inplace.data(), b.data(), outer, inner);
    expect_close(inplace, sum, 1e-6, "add in place " + name(outer, inner));
  }
}

TEST(KernelsElementwise, ReduceSumLeading) {
  for (const auto& [outer, inner] : kShapes) {
    const Vec x = random_vec(outer * inner, 3);
    DVec want(inner, 0.0);
    for (int64_t i = 0; i < outer; ++i)
      for (int64_t j = 0; j < inner; ++j)
        want[j] += x[i * inner + j];
    Vec out(inner, 99.0f);
    cpu::reduce_sum_leading(out.data(), x.data(), outer, inner);
    // Summed in double: only the final rounding remains.
    expect_close(out, want, 1e-6, "reduce_sum_leading " + name(outer, inner));
  }
}

TEST(KernelsElementwise, ReduceSumLeadingIsDeterministicAcrossThreadCounts) {
  const int64_t outer = 1000, inner = 50;
  const Vec x = random_vec(outer * inner, 4, -100.0f, 100.0f);
  const int saved = omp_get_max_threads();
  Vec one(inner), two(inner), five(inner);
  omp_set_num_threads(1);
  cpu::reduce_sum_leading(one.data(), x.data(), outer, inner);
  omp_set_num_threads(2);
  cpu::reduce_sum_leading(two.data(), x.data(), outer, inner);
  omp_set_num_threads(5);
  cpu::reduce_sum_leading(five.data(), x.data(), outer, inner);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, five);
}

TEST(KernelsElementwise, Scale) {
  for (int64_t n : {1, 9, 40000}) {
    const Vec x = random_vec(n, 5);
    DVec want(n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = double(x[i]) * -0.375;
    Vec out(n);
    cpu::scale(out.data(), x.data(), -0.375f, n);
    expect_close(out, want, 1e-7, "scale n=" + std::to_string(n)); // exact: power-of-two mantissa
  }
}

} // namespace
