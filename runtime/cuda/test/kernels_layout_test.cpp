// slice / pad / pad_into against the CPU kernels. Pure data movement: exact equality.
#include "cuda_test_util.h"

#include "megart/error.h"
#include "megart/layout_kernels.h"

#include <string>

namespace megart::cuda::test {
namespace {

using CudaLayout = CudaTest;

struct Window {
  int64_t outer, large, small, inner, offset;
};

// Window at the start, the middle and the end; inner = 1; one outer row; sizes not multiples of
// the block size.
const Window kWindows[] = {{3, 10, 4, 7, 0}, {3, 10, 4, 7, 5}, {5, 9, 3, 1, 6}, {1, 1000, 333, 3, 400}, {4, 6, 6, 5, 0}};

std::string describe(const char *kernel, const Window &w) {
  return std::string(kernel) + " outer " + std::to_string(w.outer) + " dims " + std::to_string(w.large) + "/" +
         std::to_string(w.small) + " inner " + std::to_string(w.inner) + " offset " + std::to_string(w.offset);
}

TEST_F(CudaLayout, Slice) {
  for (const Window &w : kWindows) {
    const auto in = random_floats(w.outer * w.large * w.inner, 61);
    std::vector<float> want(w.outer * w.small * w.inner);
    megart::cpu::slice(want.data(), in.data(), w.outer, w.large, w.small, w.inner, w.offset);
    const DeviceArray<float> din(in);
    DeviceArray<float> out(want.size());
    slice(out.data(), din.data(), w.outer, w.large, w.small, w.inner, w.offset);
    expect_near_all(out.get(), want, 0.0f, 0.0f, describe("slice", w));
  }
}

TEST_F(CudaLayout, PadZeroesTheRest) {
  for (const Window &w : kWindows) {
    const auto in = random_floats(w.outer * w.small * w.inner, 62);
    std::vector<float> want(w.outer * w.large * w.inner);
    megart::cpu::pad(want.data(), in.data(), w.outer, w.small, w.large, w.inner, w.offset);
    const DeviceArray<float> din(in);
    DeviceArray<float> out(random_floats(want.size(), 63)); // garbage the padding must replace
    pad(out.data(), din.data(), w.outer, w.small, w.large, w.inner, w.offset);
    expect_near_all(out.get(), want, 0.0f, 0.0f, describe("pad", w));
  }
}

TEST_F(CudaLayout, PadIntoKeepsTheRest) {
  for (const Window &w : kWindows) {
    const auto in = random_floats(w.outer * w.small * w.inner, 64);
    auto want = random_floats(w.outer * w.large * w.inner, 65);
    DeviceArray<float> out(want);
    megart::cpu::pad_into(want.data(), in.data(), w.outer, w.small, w.large, w.inner, w.offset);
    const DeviceArray<float> din(in);
    pad_into(out.data(), din.data(), w.outer, w.small, w.large, w.inner, w.offset);
    expect_near_all(out.get(), want, 0.0f, 0.0f, describe("pad_into", w));
  }
}

TEST_F(CudaLayout, WindowOutOfRangeThrows) {
  DeviceArray<float> a(100), b(100);
  EXPECT_THROW(slice(a.data(), b.data(), 1, 10, 4, 1, 7), megart::Error);
  EXPECT_THROW(pad(a.data(), b.data(), 1, 4, 10, 1, -1), megart::Error);
  EXPECT_THROW(pad_into(a.data(), b.data(), 1, 11, 10, 1, 0), megart::Error);
}

} // namespace
} // namespace megart::cuda::test
