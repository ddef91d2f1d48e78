#include "megart/error.h"
#include "megart/train_data.h"

#include "train_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

using ::testing::HasSubstr;
using train_test::TempDir;

TEST(TrainData, SamplesInDatasetOrder) {
  TempDir dir;
  // Stream 0..20 across two documents; s = 4 gives (21 - 1) / 4 = 5 samples.
  std::vector<int32_t> a(9), b(12);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 9);
  train_test::write_dataset(dir / "d", {a, b});
  megart::TrainData data(dir / "d", 4, 32);
  EXPECT_EQ(data.num_samples(), 5);
  data.set_order(false, 0);
  std::vector<int32_t> ids(8), labels(8);
  data.fill(1, 2, ids.data(), labels.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(labels, (std::vector<int32_t>{5, 6, 7, 8, 9, 10, 11, 12}));
}

TEST(TrainData, ShuffledOrderFollowsTheSeed) {
  TempDir dir;
  std::vector<int32_t> a(41);
  std::iota(a.begin(), a.end(), 0);
  train_test::write_dataset(dir / "d", {a});
  megart::TrainData data(dir / "d", 4, 64);
  data.set_order(true, 77);
  const std::vector<int64_t> order = megart::shuffled_sample_order(10, 77);
  for (int64_t pos = 0; pos < 10; ++pos) {
    int32_t ids[4], labels[4];
    data.fill(pos, 1, ids, labels);
    EXPECT_EQ(ids[0], order[pos] * 4) << "position " << pos;
    EXPECT_EQ(labels[3], order[pos] * 4 + 4);
  }
}

TEST(TrainData, RejectsTokensOutsideVocab) {
  TempDir dir;
  train_test::write_dataset(dir / "d", {{1, 2, 3}, {4, 40, 5}});
  try {
    megart::TrainData data(dir / "d", 2, 16);
    FAIL();
  } catch (const megart::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("token id 40 at position 4 is outside the compiled "
                                    "vocabulary [0, 16)"));
  }
}

TEST(TrainData, NamesMissingSamples) {
  TempDir dir;
  train_test::write_dataset(dir / "d", {std::vector<int32_t>(33, 1)});
  megart::TrainData data(dir / "d", 8, 16); // 4 samples
  EXPECT_NO_THROW(data.require_samples(0, 2, 2));
  try {
    data.require_samples(0, 3, 2);
    FAIL();
  } catch (const megart::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("--train-iters (3) x --global-batch-size (2) needs 6 samples "
                                    "of 8+1 tokens, but " + (dir / "d") + " has 4 (33 tokens); "
                                    "use --train-iters 2 or fewer, or more data"));
  }
}
