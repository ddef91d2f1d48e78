// Megatron's BERT masking (megart/mlm_masking.h): a pure function of (seed, sample, position);
// about 15% chosen, never a special token; 80 / 10 / 10 of [MASK], a random token, the token.
#include "megart/mlm_masking.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

megart::MlmMasking masking(uint64_t seed) {
  megart::MlmMasking m;
  m.seed = seed;
  m.mask_id = 4;
  m.vocab_size = 1000;
  m.never_masked = {2, 3, 0, 4}; // [CLS], [SEP], [PAD], [MASK]
  return m;
}

TEST(MlmMasking, ChoosesFifteenPercentAndMasksEightyTenTen) {
  const int64_t s = 64, samples = 2000;
  std::vector<int32_t> tokens(s), ids(s), labels(s);
  for (int64_t p = 0; p < s; ++p)
    tokens[p] = static_cast<int32_t>(100 + p); // no special token
  int64_t chosen = 0, masked = 0, random = 0, kept = 0;
  for (int64_t n = 0; n < samples; ++n) {
    megart::mask_sample(masking(1234), n, tokens.data(), s, ids.data(), labels.data());
    for (int64_t p = 0; p < s; ++p) {
      if (labels[p] == megart::kMlmIgnoredLabel) {
        ASSERT_EQ(ids[p], tokens[p]) << "an unchosen position keeps its token";
        continue;
      }
      ASSERT_EQ(labels[p], tokens[p]) << "a chosen position's label is its token";
      ++chosen;
      masked += ids[p] == 4;
      kept += ids[p] == tokens[p];
      random += ids[p] != 4 && ids[p] != tokens[p];
      ASSERT_TRUE(ids[p] >= 0 && ids[p] < 1000);
    }
  }
  // 128000 positions: 15% is 19200 (sd ~128); of the chosen, 80% / 10% / 10% (sd ~0.3%).
  EXPECT_NEAR(static_cast<double>(chosen) / (s * samples), 0.15, 0.005);
  EXPECT_NEAR(static_cast<double>(masked) / chosen, 0.80, 0.01);
  EXPECT_NEAR(static_cast<double>(random + kept) / chosen, 0.20, 0.01);
  EXPECT_GT(random, kept); // a random token is rarely the token itself
}

TEST(MlmMasking, SpecialTokensAreNeverChosen) {
  const int64_t s = 32;
  std::vector<int32_t> tokens(s, 3), ids(s), labels(s); // every token [SEP]
  for (int64_t n = 0; n < 200; ++n) {
    megart::mask_sample(masking(7), n, tokens.data(), s, ids.data(), labels.data());
    EXPECT_EQ(labels, std::vector<int32_t>(s, megart::kMlmIgnoredLabel));
    EXPECT_EQ(ids, tokens);
  }
}

// The same (seed, sample) masks the same positions whoever asks; another sample or seed others.
TEST(MlmMasking, AFunctionOfSeedSampleAndPosition) {
  const int64_t s = 48;
  std::vector<int32_t> tokens(s);
  for (int64_t p = 0; p < s; ++p)
    tokens[p] = static_cast<int32_t>(10 + 7 * p);
  auto draw = [&](uint64_t seed, int64_t sample) {
    std::vector<int32_t> ids(s), labels(s);
    megart::mask_sample(masking(seed), sample, tokens.data(), s, ids.data(), labels.data());
    return std::make_pair(ids, labels);
  };
  EXPECT_EQ(draw(5, 17), draw(5, 17));
  EXPECT_NE(draw(5, 17).second, draw(5, 18).second);
  EXPECT_NE(draw(5, 17).second, draw(6, 17).second);
}

} // namespace
