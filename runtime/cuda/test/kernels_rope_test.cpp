// Rotary embedding against the CPU kernel: forward and inverse, position offsets, in place.
//
// Tolerance: 1e-5 relative + 1e-6 absolute. The cos / sin tables are built with the CPU's float32
// rounding steps (inverse frequencies computed on the host by the same code, the float angle's
// cos / sin in double rounded once), so they agree bit for bit except for a last-bit difference
// between CUDA's and glibc's double sin / cos in rare near-tie cases; each output is then two
// products and a sum of values <= 1, where FMA contraction can differ by an ulp (~1e-7). A wrong
// frequency, sign or pairing is off by far more, even at large positions.
#include "cuda_test_util.h"

#include "megart/error.h"
#include "megart/kernels.h"

#include <string>

namespace megart::cuda::test {
namespace {

using CudaRope = CudaTest;

struct RopeCase {
  int64_t batch, seq, heads, head_dim;
  float theta;
  int64_t offset;
};

std::string describe(const RopeCase &c, bool inverse) {
  return "rope " + std::to_string(c.batch) + "x" + std::to_string(c.seq) + "x" + std::to_string(c.heads) + "x" +
         std::to_string(c.head_dim) + " theta " + std::to_string(c.theta) + " offset " + std::to_string(c.offset) +
         (inverse ? " inverse" : "");
}

// Small head_dim; half (65) not a multiple of a warp; heads * half beyond one block (256);
// Llama-3's theta with positions in the thousands (float angle rounding matters there).
const RopeCase kCases[] = {{2, 5, 3, 8, 10000.0f, 0},
                           {1, 33, 2, 130, 10000.0f, 7},
                           {2, 9, 5, 128, 500000.0f, 4090},
                           {3, 4, 1, 2, 10000.0f, 1}};

TEST_F(CudaRope, ForwardAndInverseMatchCpu) {
  for (const RopeCase &c : kCases)
    for (bool inverse : {false, true}) {
      const int64_t n = c.batch * c.seq * c.heads * c.head_dim;
      const auto x = random_floats(n, 51);
      std::vector<float> want(n);
      megart::cpu::rope_forward(want.data(), x.data(), c.batch, c.seq, c.heads, c.head_dim, c.theta, c.offset,
                                inverse);
      const DeviceArray<float> dx(x);
      DeviceArray<float> y(n);
      rope_forward(y.data(), dx.data(), c.batch, c.seq, c.heads, c.head_dim, c.theta, c.offset, inverse);
      expect_near_all(y.get(), want, 1e-5f, 1e-6f, describe(c, inverse));

      DeviceArray<float> in_place(x);
      rope_forward(in_place.data(), in_place.data(), c.batch, c.seq, c.heads, c.head_dim, c.theta, c.offset, inverse);
      expect_near_all(in_place.get(), want, 1e-5f, 1e-6f, describe(c, inverse) + " in place");
    }
}

TEST_F(CudaRope, OddHeadDimThrows) {
  DeviceArray<float> x(2 * 3 * 7);
  EXPECT_THROW(rope_forward(x.data(), x.data(), 1, 2, 3, 7, 10000.0f, 0, false), megart::Error);
}

} // namespace
} // namespace megart::cuda::test
