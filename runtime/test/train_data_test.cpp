#include "megart/error.h"
#include "megart/train_data.h"

#include "train_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
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

// Epochs (megart/epoch_order.h): a dataset of 10 samples whose sample k starts with token 4k.
namespace {

constexpr int64_t kSamples = 10, kSeq = 4;

void write_counting_dataset(const std::string &prefix) {
  std::vector<int32_t> tokens(kSamples * kSeq + 1);
  std::iota(tokens.begin(), tokens.end(), 0);
  train_test::write_dataset(prefix, {tokens});
}

// The samples at positions first .. first + count - 1.
std::vector<int64_t> samples_at(megart::TrainData &data, int64_t first, int64_t count) {
  std::vector<int32_t> ids(static_cast<size_t>(count * kSeq)), labels(ids.size());
  data.fill(first, count, ids.data(), labels.data());
  std::vector<int64_t> samples;
  for (int64_t j = 0; j < count; ++j)
    samples.push_back(ids[static_cast<size_t>(j * kSeq)] / kSeq);
  return samples;
}

} // namespace

TEST(TrainData, EachEpochReadsEverySampleOnceInItsOwnOrder) {
  TempDir dir;
  write_counting_dataset(dir / "d");
  megart::TrainData data(dir / "d", kSeq, 64);
  data.set_order(true, 77);
  const std::vector<int64_t> all = samples_at(data, 0, 4 * kSamples);
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 4; ++e) {
    epochs.emplace_back(all.begin() + e * kSamples, all.begin() + (e + 1) * kSamples);
    std::vector<int64_t> sorted = epochs.back();
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> every(kSamples);
    std::iota(every.begin(), every.end(), 0);
    EXPECT_EQ(sorted, every) << "epoch " << e;
  }
  // The first epoch is the order a run within one epoch always read.
  EXPECT_EQ(epochs[0], megart::shuffled_sample_order(kSamples, 77));
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b)
      EXPECT_NE(epochs[a], epochs[b]) << "epochs " << a << " and " << b;
  // Another seed, other orders in every epoch.
  data.set_order(true, 78);
  const std::vector<int64_t> reseeded = samples_at(data, 0, 4 * kSamples);
  for (int e = 0; e < 4; ++e)
    EXPECT_NE(std::vector<int64_t>(reseeded.begin() + e * kSamples, reseeded.begin() + (e + 1) * kSamples), epochs[e]);
}

TEST(TrainData, UnshuffledEpochsRepeatDatasetOrder) {
  TempDir dir;
  write_counting_dataset(dir / "d");
  megart::TrainData data(dir / "d", kSeq, 64);
  data.set_order(false, 77);
  const std::vector<int64_t> all = samples_at(data, 7, 25);
  for (int64_t j = 0; j < 25; ++j)
    EXPECT_EQ(all[static_cast<size_t>(j)], (7 + j) % kSamples) << "position " << 7 + j;
}

// Every plan reads the one global sequence: data-parallel ranks (each its own process, so its
// own TrainData) read their slice of each global batch, pipeline stages of a replica the same
// slice, and a resumed run starts mid-stream.
TEST(TrainData, EveryDataParallelSplitReadsTheSameSequence) {
  TempDir dir;
  write_counting_dataset(dir / "d");
  constexpr int64_t kBatch = 8, kIterations = 6; // 48 positions: 5 epochs, the last partial
  megart::TrainData one(dir / "d", kSeq, 64);
  one.set_order(true, 5);
  const std::vector<int64_t> expected = samples_at(one, 0, kBatch * kIterations);
  for (int64_t dp : {2, 4, 8}) {
    for (int64_t start : {int64_t{0}, int64_t{3}}) { // from the beginning, or resumed at iteration 3
      std::vector<int64_t> got(static_cast<size_t>(kBatch * kIterations), -1);
      for (int64_t rank = 0; rank < dp; ++rank) {
        megart::TrainData mine(dir / "d", kSeq, 64), stage2(dir / "d", kSeq, 64);
        mine.set_order(true, 5);
        stage2.set_order(true, 5);
        const int64_t per_rank = kBatch / dp;
        for (int64_t k = start; k < kIterations; ++k) {
          const int64_t first = k * kBatch + rank * per_rank;
          const std::vector<int64_t> slice = samples_at(mine, first, per_rank);
          EXPECT_EQ(samples_at(stage2, first, per_rank), slice);
          std::copy(slice.begin(), slice.end(), got.begin() + first);
        }
      }
      EXPECT_EQ(std::vector<int64_t>(got.begin() + start * kBatch, got.end()),
                std::vector<int64_t>(expected.begin() + start * kBatch, expected.end()))
          << "dp " << dp << " from iteration " << start;
    }
  }
}

TEST(TrainData, RunsLongerThanTheDataAreFurtherEpochs) {
  TempDir dir;
  train_test::write_dataset(dir / "d", {std::vector<int32_t>(33, 1)});
  megart::TrainData data(dir / "d", 8, 16); // 4 samples
  EXPECT_NO_THROW(data.require_samples(0, 3, 2));
  EXPECT_NO_THROW(data.require_samples(6, 1000, 4));
  EXPECT_EQ(data.describe_epochs(0, 10), "3 epochs, the last partial"); // epoch_order_test has the rest
  EXPECT_EQ(data.describe_epochs(6, 16), "epochs 2 to 4");
}

TEST(TrainData, NamesDataWithoutOneSample) {
  TempDir dir;
  train_test::write_dataset(dir / "d", {{1, 2, 3}, {4, 5, 6, 7, 8}});
  megart::TrainData data(dir / "d", 8, 16);
  EXPECT_EQ(data.num_samples(), 0);
  try {
    data.require_samples(0, 1, 2);
    FAIL();
  } catch (const megart::Error &e) {
    EXPECT_EQ(std::string(e.what()), (dir / "d") + ": documents 0..2 hold 8 tokens, fewer than one sample of "
                                     "8+1 tokens; use more data, or compile a spec with a smaller seq_length");
  }
}

TEST(TrainData, NamesSampleCountsPast64Bits) {
  TempDir dir;
  train_test::write_dataset(dir / "d", {std::vector<int32_t>(33, 1)});
  megart::TrainData data(dir / "d", 8, 16);
  const int64_t max = std::numeric_limits<int64_t>::max();
  try {
    data.require_samples(0, max / 2, 4);
    FAIL();
  } catch (const megart::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("--train-iters (" + std::to_string(max / 2) + ") x --global-batch-size (4) "
                                    "needs more than 2^63 samples, more than a sample's position can count; "
                                    "use --train-iters " + std::to_string(max / 4) + " or fewer"));
  }
  try { // a resumed run: --train-iters counts the iterations done too
    data.require_samples(40, max / 4, 4);
    FAIL();
  } catch (const megart::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("the remaining iterations (" + std::to_string(max / 4) + ") x --global-batch-size "
                                    "(4) needs more than 2^63 samples after the 40 already used"));
    EXPECT_THAT(e.what(), HasSubstr("use --train-iters " + std::to_string((max - 40) / 4 + 10) + " or fewer"));
  }
  try { // one iteration's tokens alone
    data.require_samples(0, 1, max / 8);
    FAIL();
  } catch (const megart::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("--global-batch-size (" + std::to_string(max / 8) + ") needs more than 2^63 "
                                    "bytes for one iteration's samples of 8+1 tokens; use a smaller "
                                    "--global-batch-size"));
  }
}
