#include "megart/data_blend.h"
#include "megart/error.h"
#include "megart/train_data.h"

#include "train_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

using ::testing::HasSubstr;
using train_test::TempDir;

TEST(DataBlend, WeightsAndPrefixesAreNormalised) {
  const std::vector<megart::BlendEntry> blend = megart::parse_blend({"30", "a", "70", "b"}, "--data-path");
  ASSERT_EQ(blend.size(), 2u);
  EXPECT_DOUBLE_EQ(blend[0].weight, 0.3);
  EXPECT_EQ(blend[1].prefix, "b");
  EXPECT_DOUBLE_EQ(blend[1].weight, 0.7);
}

TEST(DataBlend, PrefixesAloneAreWeightedBySize) {
  const std::vector<megart::BlendEntry> blend = megart::parse_blend({"a", "b"}, "--data-path");
  ASSERT_EQ(blend.size(), 2u);
  EXPECT_LT(blend[0].weight, 0);
  EXPECT_EQ(blend[1].prefix, "b");
}

TEST(DataBlend, RefusesHalfWeightedBlends) {
  EXPECT_THROW(megart::parse_blend({"0.3", "a", "b"}, "--data-path"), megart::Error);
  EXPECT_THROW(megart::parse_blend({"-1", "a", "2", "b"}, "--data-path"), megart::Error);
  EXPECT_THROW(megart::parse_blend({"0", "a", "0", "b"}, "--data-path"), megart::Error);
  EXPECT_THROW(megart::parse_blend({}, "--data-path"), megart::Error);
}

TEST(DataBlend, SplitBookendsRound) {
  const std::vector<double> split = megart::parse_split("949, 50, 1");
  EXPECT_DOUBLE_EQ(split[0], 0.949);
  const megart::DocumentRange valid = megart::split_documents(split, 1, 1000);
  EXPECT_EQ(valid.begin, 949);
  EXPECT_EQ(valid.end, 999);
  EXPECT_EQ(megart::split_documents(megart::parse_split("98"), 2, 10).begin, 10); // missing parts are 0
  EXPECT_THROW(megart::parse_split("0,0,0"), megart::Error);
  EXPECT_THROW(megart::parse_split("1,2,3,4"), megart::Error);
}

// Each sample goes to the dataset furthest behind its weight; the counts stay within one
// sample of weight x samples.
TEST(DataBlend, OrderFollowsTheWeights) {
  megart::BlendOrder order({0.25, 0.75});
  std::vector<int64_t> taken(2, 0);
  for (int64_t i = 0; i < 1000; ++i) {
    const auto [d, index] = order.at(i);
    EXPECT_EQ(index, taken[static_cast<size_t>(d)]) << "sample " << i;
    ++taken[static_cast<size_t>(d)];
    EXPECT_LE(std::abs(static_cast<double>(taken[0]) - 0.25 * static_cast<double>(i + 1)), 1.0);
  }
  EXPECT_EQ(order.counts(1000).samples, taken);
  EXPECT_TRUE(order.counts(1000).exact);
  EXPECT_EQ(order.at(3), megart::BlendOrder({0.25, 0.75}).at(3)); // going back restarts the walk
}

// Past the walk limit a blend's counts are weight x count by largest remainder: within 2 of the
// walk's, adding up to the count, and a run of 2^62 positions costs no walk.
TEST(DataBlend, CountsPastTheWalkLimitAreCloseEstimates) {
  for (const std::vector<double> &weights :
       {std::vector<double>{0.25, 0.75}, {0.1, 0.2, 0.3, 0.4}, {1.0 / 3, 1.0 / 3, 1.0 / 3}, {0.999, 0.001}}) {
    const megart::BlendOrder order(weights);
    for (int64_t count : {1, 2, 7, 100, 12345}) {
      const megart::BlendOrder::Counts walked = order.counts(count), estimated = order.counts(count, 0);
      ASSERT_TRUE(walked.exact);
      ASSERT_FALSE(estimated.exact);
      int64_t total = 0;
      for (size_t d = 0; d < weights.size(); ++d) {
        EXPECT_LE(std::abs(walked.samples[d] - estimated.samples[d]), 2) << count << " dataset " << d;
        total += estimated.samples[d];
      }
      EXPECT_EQ(total, count);
    }
  }
  const megart::BlendOrder::Counts huge = megart::BlendOrder({0.25, 0.75}).counts(int64_t{1} << 62);
  EXPECT_FALSE(huge.exact);
  EXPECT_EQ(huge.samples, (std::vector<int64_t>{int64_t{1} << 60, 3 * (int64_t{1} << 60)}));
}

TEST(TrainData, BlendsTwoDatasetsBySplit) {
  TempDir dir;
  // Dataset a: 10 documents of 5 tokens 0..49; b: 10 documents of 5 tokens 100..149.
  std::vector<std::vector<int32_t>> a, b;
  for (int d = 0; d < 10; ++d) {
    a.emplace_back(5);
    std::iota(a.back().begin(), a.back().end(), d * 5);
    b.emplace_back(5);
    std::iota(b.back().begin(), b.back().end(), 100 + d * 5);
  }
  train_test::write_dataset(dir / "a", a);
  train_test::write_dataset(dir / "b", b);
  const auto blend = megart::parse_blend({"1", dir / "a", "1", dir / "b"}, "--data-path");
  // valid: documents 8..9 of each: tokens 40..49 and 140..149; s = 4 gives 2 samples each.
  megart::TrainData valid(blend, megart::parse_split("8,2"), 1, 4, 256, "--data-path");
  EXPECT_EQ(valid.num_samples(), 4);
  valid.set_order(false, 0);
  std::vector<int32_t> ids(16), labels(16);
  valid.fill(0, 4, ids.data(), labels.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{40, 41, 42, 43, 140, 141, 142, 143, 44, 45, 46, 47, 144, 145, 146, 147}));
  EXPECT_THAT(valid.describe(4), HasSubstr("documents 8..10 of 10, 2 samples; gives 2"));
  megart::TrainData train(blend, megart::parse_split("8,2"), 0, 4, 256, "--data-path");
  EXPECT_EQ(train.num_samples(), 2 * 9); // 40 tokens each: (40 - 1) / 4
}

// As Megatron's blends: each dataset cycles through its own epochs, each in its own order.
TEST(TrainData, EachDatasetOfABlendCyclesThroughItsOwnEpochs) {
  TempDir dir;
  std::vector<int32_t> a(41), b(9);
  std::iota(a.begin(), a.end(), 0);   // 10 samples of 4+1: sample k starts with 4k
  std::iota(b.begin(), b.end(), 100); // 2: 100, 104
  train_test::write_dataset(dir / "a", {a});
  train_test::write_dataset(dir / "b", {b});
  megart::TrainData data(megart::parse_blend({"0.5", dir / "a", "0.5", dir / "b"}, "--data-path"), {}, 0, 4, 256,
                         "--data-path");
  EXPECT_NO_THROW(data.require_samples(0, 3, 4)); // b gives 6: three epochs
  EXPECT_THAT(data.describe(12), HasSubstr(dir / "a" + ": documents 0..1 of 1, 10 samples; gives 6 (1 epoch, partial)"));
  EXPECT_THAT(data.describe(12), HasSubstr(dir / "b" + ": documents 0..1 of 1, 2 samples; gives 6 (3 epochs)"));
  // A run too long to walk (here 2^61 samples) says its counts are estimates, without a wait.
  EXPECT_THAT(data.describe(int64_t{1} << 61),
              HasSubstr(dir / "b" + ": documents 0..1 of 1, 2 samples; gives about " +
                        std::to_string(int64_t{1} << 60) + " (" + std::to_string(int64_t{1} << 59) + " epochs)"));
  EXPECT_EQ(data.describe_epochs(0, 12), ""); // each dataset has its own
  data.set_order(true, 3);
  std::vector<int32_t> ids(12 * 4), labels(12 * 4);
  data.fill(0, 12, ids.data(), labels.data());
  std::vector<int32_t> from_a, from_b;
  for (int j = 0; j < 12; ++j)
    (ids[j * 4] >= 100 ? from_b : from_a).push_back(ids[j * 4]);
  ASSERT_EQ(from_b.size(), 6u);
  for (size_t e = 0; e < 3; ++e) // every epoch of b: both its samples
    EXPECT_EQ(std::min(from_b[2 * e], from_b[2 * e + 1]) + 4, std::max(from_b[2 * e], from_b[2 * e + 1])) << e;
  std::sort(from_a.begin(), from_a.end());
  EXPECT_EQ(std::unique(from_a.begin(), from_a.end()), from_a.end()); // a is still in its first epoch
}

TEST(TrainData, NamesTheBlendedDatasetWithoutOneSample) {
  TempDir dir;
  train_test::write_dataset(dir / "a", {std::vector<int32_t>(41, 1)}); // 10 samples of 4+1
  train_test::write_dataset(dir / "b", {std::vector<int32_t>(4, 1)});  // none
  megart::TrainData data(megart::parse_blend({"0.5", dir / "a", "0.5", dir / "b"}, "--data-path"), {}, 0, 4, 16,
                         "--data-path");
  try {
    data.require_samples(0, 3, 2);
    FAIL();
  } catch (const megart::Error &e) {
    EXPECT_EQ(std::string(e.what()), "--data-path: " + (dir / "b") + " must give 3 of the blend's first 6 samples "
                                     "(weight 0.500000), but has not one sample of 4+1 tokens (4 tokens in "
                                     "documents 0..1); leave it out of --data-path, or give it more documents");
  }
  // So does a run too long to walk, at once.
  try {
    data.require_samples(0, int64_t{1} << 40, 2);
    FAIL();
  } catch (const megart::Error &e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr(" must give about " + std::to_string(int64_t{1} << 40) +
                                                 " of the blend's first " + std::to_string(int64_t{1} << 41)));
  }
  // Weighted by size, it has weight 0 and gives none.
  megart::TrainData by_size(megart::parse_blend({dir / "a", dir / "b"}, "--data-path"), {}, 0, 4, 16, "--data-path");
  EXPECT_NO_THROW(by_size.require_samples(0, 3, 2));
}
