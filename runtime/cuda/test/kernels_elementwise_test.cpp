// add / mul / scale / reduce_sum_leading against the CPU kernels.
//
// Tolerances: add, mul and scale are one IEEE float operation per element on both sides, so
// they must agree exactly. reduce_sum_leading sums in double (over the same fixed row blocks as
// the CPU) and rounds once to float: any summation order gives results within 1 ulp of each
// other (the double error, ~1e-16 relative per term, is far below float rounding), so 3e-7
// relative (2.5 ulp) is the bound (1e-10 absolute for a sum that cancels to near 0).
#include "cuda_test_util.h"

#include "megart/kernels.h"

#include <string>
#include <utility>

namespace megart::cuda::test {
namespace {

using CudaElementwise = CudaTest;

std::string shape(int64_t outer, int64_t inner) { return std::to_string(outer) + "x" + std::to_string(inner); }

// outer = 1 (same shape), odd sizes, more elements than one block, more rows than a row block.
const std::pair<int64_t, int64_t> kShapes[] = {{1, 1}, {1, 1000}, {7, 333}, {300, 17}, {33, 257}};

TEST_F(CudaElementwise, AddAndMulBroadcastRows) {
  for (const auto &[outer, inner] : kShapes) {
    const auto a = random_floats(outer * inner, 1), b = random_floats(inner, 2);
    const DeviceArray<float> da(a), db(b);
    DeviceArray<float> out(a.size());
    std::vector<float> want(a.size());

    megart::cpu::add(want.data(), a.data(), b.data(), outer, inner);
    add(out.data(), da.data(), db.data(), outer, inner);
    expect_near_all(out.get(), want, 0.0f, 0.0f, "add " + shape(outer, inner));

    megart::cpu::mul(want.data(), a.data(), b.data(), outer, inner);
    mul(out.data(), da.data(), db.data(), outer, inner);
    expect_near_all(out.get(), want, 0.0f, 0.0f, "mul " + shape(outer, inner));
  }
}

TEST_F(CudaElementwise, AddAndMulInPlace) {
  const int64_t outer = 9, inner = 301;
  const auto a = random_floats(outer * inner, 3), b = random_floats(inner, 4);
  const DeviceArray<float> db(b);
  std::vector<float> want(a.size());

  DeviceArray<float> x(a);
  megart::cpu::add(want.data(), a.data(), b.data(), outer, inner);
  add(x.data(), x.data(), db.data(), outer, inner);
  expect_near_all(x.get(), want, 0.0f, 0.0f, "add in place");

  DeviceArray<float> y(a);
  megart::cpu::mul(want.data(), a.data(), b.data(), outer, inner);
  mul(y.data(), y.data(), db.data(), outer, inner);
  expect_near_all(y.get(), want, 0.0f, 0.0f, "mul in place");
}

TEST_F(CudaElementwise, ScaleOutOfPlaceAndInPlace) {
  for (int64_t n : {1, 255, 257, 100003}) {
    const auto x = random_floats(n, 5);
    std::vector<float> want(x.size());
    megart::cpu::scale(want.data(), x.data(), -1.7f, n);

    const DeviceArray<float> dx(x);
    DeviceArray<float> out(x.size());
    scale(out.data(), dx.data(), -1.7f, n);
    expect_near_all(out.get(), want, 0.0f, 0.0f, "scale n=" + std::to_string(n));

    DeviceArray<float> in_place(x);
    scale(in_place.data(), in_place.data(), -1.7f, n);
    expect_near_all(in_place.get(), want, 0.0f, 0.0f, "scale in place n=" + std::to_string(n));
  }
}

// Dropout is one multiplication by the same float per element on both sides: exact. The blocks
// sit inside a wider tensor (an sp / tp rank's share, a later microbatch's samples).
TEST_F(CudaElementwise, DropoutMatchesCpuExactly) {
  for (const auto &[outer, inner] : kShapes) {
    DropoutBlock block;
    block.rate = 0.3f;
    block.key = 0xfeedull + static_cast<uint64_t>(inner);
    block.rank = 3;
    const int64_t dims[] = {2, outer, inner}, offset[] = {5, outer, 1}, extent[] = {0, 3 * outer, inner + 3};
    for (int d = 0; d < 3; ++d) {
      block.shape[d] = dims[d];
      block.offset[d] = offset[d];
      block.extent[d] = extent[d];
    }
    const auto x = random_floats(2 * outer * inner, 5);
    std::vector<float> want(x.size());
    megart::cpu::apply_dropout(want.data(), x.data(), block);
    DeviceArray<float> dx(x), out(x.size());
    apply_dropout(out.data(), dx.data(), block);
    EXPECT_EQ(out.get(), want) << "dropout " << shape(outer, inner);
    apply_dropout(dx.data(), dx.data(), block); // in place
    EXPECT_EQ(dx.get(), want) << "dropout in place " << shape(outer, inner);
  }
}

TEST_F(CudaElementwise, ReduceSumLeading) {
  for (const auto &[outer, inner] : {std::pair<int64_t, int64_t>{1, 5}, {33, 129}, {1000, 3}, {70, 300}, {64, 1}}) {
    const auto x = random_floats(outer * inner, 6);
    std::vector<float> want(inner);
    megart::cpu::reduce_sum_leading(want.data(), x.data(), outer, inner);
    const DeviceArray<float> dx(x);
    DeviceArray<float> out(random_floats(inner, 7)); // garbage: the kernel must overwrite it
    reduce_sum_leading(out.data(), dx.data(), outer, inner);
    expect_near_all(out.get(), want, 3e-7f, 1e-10f, "reduce_sum_leading " + shape(outer, inner));
  }
}

} // namespace
} // namespace megart::cuda::test
