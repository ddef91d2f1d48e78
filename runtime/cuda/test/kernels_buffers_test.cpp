// copy_buffer / zero_buffer / read_scalar: plain data movement, so every check is exact.
#include "cuda_test_util.h"

namespace megart::cuda::test {
namespace {

using CudaBuffers = CudaTest;

TEST_F(CudaBuffers, CopyZeroAndReadBack) {
  const size_t n = 1001; // not a multiple of anything
  const auto host = random_floats(n, 11);
  const DeviceArray<float> src(host);
  DeviceArray<float> dst(random_floats(n, 12));

  copy_buffer(dst.data(), src.data(), n * sizeof(float));
  expect_near_all(dst.get(), host, 0.0f, 0.0f, "copied");

  // Zero a window in the middle; the rest must stay as copied.
  zero_buffer(dst.data() + 3, 500 * sizeof(float));
  auto want = host;
  std::fill(want.begin() + 3, want.begin() + 503, 0.0f);
  expect_near_all(dst.get(), want, 0.0f, 0.0f, "partly zeroed");

  // Empty operations are no-ops, not errors.
  copy_buffer(dst.data(), src.data(), 0);
  zero_buffer(dst.data(), 0);
  expect_near_all(dst.get(), want, 0.0f, 0.0f, "after empty operations");

  EXPECT_EQ(read_scalar(src.data() + 777), host[777]);
  EXPECT_EQ(read_scalar(dst.data() + 3), 0.0f);
}

TEST_F(CudaBuffers, ReadScalarWaitsForQueuedWork) {
  // read_scalar must see the result of work still queued on the stream when it is called.
  const auto host = random_floats(1 << 20, 13);
  const DeviceArray<float> src(host);
  DeviceArray<float> dst(host.size());
  copy_buffer(dst.data(), src.data(), host.size() * sizeof(float));
  EXPECT_EQ(read_scalar(dst.data() + host.size() - 1), host.back());
}

} // namespace
} // namespace megart::cuda::test
