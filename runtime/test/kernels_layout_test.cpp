#include "megart/layout_kernels.h"

#include <gtest/gtest.h>

#include <vector>

// [2, 4, 3] sliced to [2, 2, 3] at offset 1 along the middle dimension, then padded back.
TEST(KernelsLayout, SliceThenPadRestoresTheSlicedPart) {
  const int64_t outer = 2, dim = 4, part = 2, inner = 3, offset = 1;
  std::vector<float> in(outer * dim * inner);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = 1.0f + static_cast<float>(i);
  std::vector<float> sliced(outer * part * inner), padded(in.size(), -1.0f);
  megart::cpu::slice(sliced.data(), in.data(), outer, dim, part, inner, offset);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t d = 0; d < part; ++d)
      for (int64_t i = 0; i < inner; ++i)
        EXPECT_EQ(sliced[(o * part + d) * inner + i], in[(o * dim + d + offset) * inner + i]);
  megart::cpu::pad(padded.data(), sliced.data(), outer, part, dim, inner, offset);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t i = 0; i < inner; ++i) {
        float expected = (d >= offset && d < offset + part) ? in[(o * dim + d) * inner + i] : 0.0f;
        EXPECT_EQ(padded[(o * dim + d) * inner + i], expected);
      }
}
