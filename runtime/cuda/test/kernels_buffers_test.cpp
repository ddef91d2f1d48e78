// copy_buffer / zero_buffer / read_scalar: plain data movement, so every check is exact; and the
// bf16 conversions (--grad-reduce-in-bf16) bit for bit against the CPU's.
#include "cuda_test_util.h"

#include "megart/bf16.h"

#include <cstring>
#include <limits>

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

TEST_F(CudaBuffers, Bf16ConversionsMatchTheCpu) {
  // Random values of every magnitude, ties of bf16 (1 + odd x 2^-8), overflow past the largest
  // bf16, subnormals, signed zeros and infinities.
  std::vector<float> in = random_floats(100001, 14, -3.0f, 3.0f);
  std::mt19937 gen(15);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 100000; ++i) {
    const uint32_t u = any_bits(gen) & 0xFF7FFFFFu; // finite: exponent below all ones
    float x;
    std::memcpy(&x, &u, sizeof x);
    in.push_back(x);
  }
  for (int odd = 1; odd < 256; odd += 2)
    in.push_back(1.0f + odd * std::ldexp(1.0f, -8));
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {3.3961e38f, std::numeric_limits<float>::max(), 1e-40f, -1e-45f, 0.0f, -0.0f, inf, -inf})
    in.push_back(x);

  const DeviceArray<float> src(in);
  DeviceArray<uint16_t> bits(in.size());
  floats_to_bf16(bits.data(), src.data(), static_cast<int64_t>(in.size()));
  const std::vector<uint16_t> got = bits.get();
  int64_t wrong = 0;
  for (size_t i = 0; i < in.size(); ++i)
    if (got[i] != float_to_bf16(in[i]) && wrong++ < 5)
      ADD_FAILURE() << "floats_to_bf16(" << in[i] << "): got 0x" << std::hex << got[i] << ", the CPU 0x"
                    << float_to_bf16(in[i]);
  EXPECT_EQ(wrong, 0);

  DeviceArray<float> back(in.size());
  bf16_to_floats(back.data(), bits.data(), static_cast<int64_t>(in.size()));
  const std::vector<float> widened = back.get();
  for (size_t i = 0; i < in.size(); ++i) {
    const float want = bf16_to_float(got[i]);
    ASSERT_EQ(std::memcmp(&widened[i], &want, sizeof(float)), 0) << i;
  }

  // NaN stays NaN (its payload bits may differ between the GPU and the CPU).
  const DeviceArray<float> nan(std::vector<float>{std::numeric_limits<float>::quiet_NaN()});
  DeviceArray<uint16_t> nan_bits(1);
  floats_to_bf16(nan_bits.data(), nan.data(), 1);
  EXPECT_TRUE(std::isnan(bf16_to_float(nan_bits.get()[0])));
}

} // namespace
} // namespace megart::cuda::test
