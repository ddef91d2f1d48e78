#include "megart/generate.h"

#include <gtest/gtest.h>

#include <vector>

// Greedy takes the first of the largest logits; padding rows past vocab_size are never drawn.
TEST(Generate, GreedyIsTheFirstLargest) {
  const std::vector<float> logits = {0.5f, 2.0f, 2.0f, -1.0f, 9.0f /* padding */};
  megart::SamplingOptions greedy;
  greedy.top_k = 1;
  EXPECT_EQ(megart::next_token(logits.data(), 4, greedy, 0.99), 1);
  greedy.top_k = 0;
  greedy.temperature = 0;
  EXPECT_EQ(megart::next_token(logits.data(), 4, greedy, 0.5), 1);
}

// Top k and top p keep the likeliest tokens only, and the draws follow the probabilities.
TEST(Generate, SamplingKeepsTheLikeliest) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f};
  megart::SamplingOptions o;
  o.top_k = 2;
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 1000; ++i)
    ++counts[static_cast<size_t>(megart::next_token(logits.data(), 4, o, (i + 0.5) / 1000))];
  EXPECT_EQ(counts[0] + counts[1], 0);
  // p(3) / p(2) = e: 731 of 1000 within a draw of rounding.
  EXPECT_NEAR(counts[3], 731, 2);
  o.top_k = 0;
  o.top_p = 0.5; // token 3 alone has 0.64 of the probability
  for (double u : {0.01, 0.5, 0.99})
    EXPECT_EQ(megart::next_token(logits.data(), 4, o, u), 3);
}
