#include "megart/param_init.h"
#include "megart/param_layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using megart::ParamDesc;
using megart::ParamInit;

namespace {

ParamDesc tensor(const char *name, int64_t rows, int64_t cols, ParamInit init = ParamInit::Normal) {
  return {name, 2, {rows, cols}, {0, 0}, {rows, cols}, init, 0.02f, true};
}

ParamDesc block(ParamDesc whole, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
  whole.shape[0] = rows;
  whole.shape[1] = cols;
  whole.offsets[0] = r0;
  whole.offsets[1] = c0;
  return whole;
}

// Initialises each block and assembles the full tensor from them.
std::vector<float> init_blocks(const std::vector<ParamDesc> &blocks, uint64_t seed) {
  std::vector<float> full(static_cast<size_t>(megart::full_numel(blocks[0])), NAN);
  for (const ParamDesc &d : blocks) {
    std::vector<float> buf(static_cast<size_t>(megart::block_numel(d)));
    megart::init_param_block(d, seed, buf.data());
    megart::copy_block_to_full(d, buf.data(), full.data());
  }
  return full;
}

} // namespace

TEST(TrainInit, BlockSplitDoesNotChangeValues) {
  // GPT-2's c_attn: [h, 3h] split into q, k, v column blocks; and a row split.
  const ParamDesc whole = tensor("transformer.h.0.attn.c_attn.weight", 6, 9);
  const std::vector<float> reference = init_blocks({whole}, 1234);
  const std::vector<float> columns =
      init_blocks({block(whole, 0, 0, 6, 3), block(whole, 0, 3, 6, 3), block(whole, 0, 6, 6, 3)},
                  1234);
  const std::vector<float> rows = init_blocks({block(whole, 4, 0, 2, 9), block(whole, 0, 0, 4, 9)},
                                              1234);
  ASSERT_EQ(reference.size(), 54u);
  for (size_t i = 0; i < reference.size(); ++i) {
    ASSERT_TRUE(std::isfinite(reference[i]));
    EXPECT_EQ(reference[i], columns[i]) << "element " << i;
    EXPECT_EQ(reference[i], rows[i]) << "element " << i;
  }
}

TEST(TrainInit, DependsOnSeedAndName) {
  const std::vector<float> a = init_blocks({tensor("a", 4, 4)}, 1);
  EXPECT_EQ(a, init_blocks({tensor("a", 4, 4)}, 1));
  EXPECT_NE(a, init_blocks({tensor("a", 4, 4)}, 2));
  EXPECT_NE(a, init_blocks({tensor("b", 4, 4)}, 1));
}

TEST(TrainInit, NormalHasRequestedMeanAndStd) {
  ParamDesc d = tensor("big", 400, 500);
  d.init_std = 0.5f;
  const std::vector<float> v = init_blocks({d}, 7);
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(v.size());
  const double mean = sum / n, stddev = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.005);      // 5 standard errors (0.5 / sqrt(2e5) ~ 0.0011)
  EXPECT_NEAR(stddev, 0.5, 0.005);
}

TEST(TrainInit, ZerosAndOnes) {
  EXPECT_EQ(init_blocks({tensor("z", 2, 3, ParamInit::Zeros)}, 1), std::vector<float>(6, 0.0f));
  EXPECT_EQ(init_blocks({tensor("o", 2, 3, ParamInit::Ones)}, 1), std::vector<float>(6, 1.0f));
}

TEST(TrainInit, GeneratorIsPinned) {
  // The formula in param_init.h is a contract (other devices and tools reproduce it): pin it.
  EXPECT_EQ(megart::fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(megart::fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  const uint64_t key = megart::init_tensor_key(1234, "w");
  const double z0 = megart::init_standard_normal(key, 0);
  EXPECT_EQ(z0, megart::init_standard_normal(key, 0));
  EXPECT_NE(z0, megart::init_standard_normal(key, 1));
  EXPECT_LT(std::fabs(z0), 8.0);
}
