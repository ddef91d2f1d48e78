// EpochOrder (megart/epoch_order.h): the seeds of the epochs, the permutation kept per epoch,
// and the header's words for the epochs a run spans.
#include "megart/epoch_order.h"
#include "megart/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

TEST(EpochOrder, FirstEpochKeepsTheSeedLaterOnesHashIt) {
  EXPECT_EQ(megart::epoch_seed(1234, 0), 1234u);
  std::vector<uint64_t> seeds;
  for (int64_t e = 0; e < 1000; ++e)
    seeds.push_back(megart::epoch_seed(1234, e));
  std::sort(seeds.begin(), seeds.end());
  EXPECT_EQ(std::unique(seeds.begin(), seeds.end()), seeds.end()); // every epoch its own
  // Not neighbours on SplitMix64's stream (seed + epoch x 0x9E3779B97F4A7C15 would share it).
  EXPECT_NE(megart::epoch_seed(1234, 1), 1234u + 0x9E3779B97F4A7C15ull);
  // Going back to an earlier epoch redraws its order.
  megart::EpochOrder order(5, true, 9);
  const int64_t first = order.sample_at(0), later = order.sample_at(12);
  EXPECT_EQ(order.sample_at(0), first);
  EXPECT_EQ(order.sample_at(12), later);
  EXPECT_EQ(megart::EpochOrder(5, true, 9).sample_at(12), later);
  EXPECT_THROW(megart::EpochOrder(0, true, 9).sample_at(0), megart::Error);
}

TEST(EpochOrder, DescribesTheEpochsARunSpans) {
  EXPECT_EQ(megart::describe_epochs(0, 4, 4), "1 epoch");
  EXPECT_EQ(megart::describe_epochs(0, 3, 4), "1 epoch, partial");
  EXPECT_EQ(megart::describe_epochs(0, 12, 4), "3 epochs");
  EXPECT_EQ(megart::describe_epochs(0, 10, 4), "3 epochs, the last partial");
  EXPECT_EQ(megart::describe_epochs(6, 7, 4), "epoch 2, partial");
  EXPECT_EQ(megart::describe_epochs(6, 16, 4), "epochs 2 to 4");
  EXPECT_EQ(megart::describe_epochs(4, 4, 4), ""); // nothing read
  EXPECT_EQ(megart::describe_epochs(0, 4, 0), ""); // no sample
}
