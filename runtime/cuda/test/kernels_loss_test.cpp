// Cross-entropy, fused and vocabulary-parallel, against the CPU kernels.
//
// Tolerances. Losses: both sides sum exp(logit - max) per row in double (the GPU's terms come
// from float expf, within 2 ulp, of a float difference) and take log in double, so a token's
// loss differs by ~1e-7 relative; 1e-5 relative on the mean. Gradients: each entry is
// p * dloss / tokens, computed on the GPU in float (expf times a float factor: a few ulp) and
// on the CPU in double rounded once, so 1e-5 relative; the absolute floor 1e-6 * dloss / tokens
// covers the label column, where p - 1 cancels (the CPU subtracts in float in the from-stats
// kernel, so an ulp of dloss / tokens is the inherent difference there).
#include "cuda_test_util.h"

#include "megart/error.h"
#include "megart/kernels.h"
#include "megart/parallel_kernels.h"

#include <cmath>
#include <limits>
#include <string>

namespace megart::cuda::test {
namespace {

using CudaLoss = CudaTest;

struct Case {
  int64_t tokens, vocab, valid;
};

// One column; odd small rows; vocab padding (valid < vocab) with rows beyond one block; a
// GPT-2-sized padded vocabulary.
const Case kCases[] = {{1, 1, 1}, {5, 7, 7}, {33, 1000, 997}, {3, 50304, 50257}, {40, 300, 300}};

std::string describe(const Case &c) {
  return std::to_string(c.tokens) + " tokens, vocab " + std::to_string(c.vocab) + " (" + std::to_string(c.valid) +
         " valid)";
}

// Logits in [-4, 4) with large values on the padding: leaking them into the softmax would move
// the loss by O(1).
std::vector<float> padded_logits(const Case &c, uint64_t seed) {
  auto logits = random_floats(c.tokens * c.vocab, seed, -4.0f, 4.0f);
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t j = c.valid; j < c.vocab; ++j)
      logits[t * c.vocab + j] = 50.0f;
  return logits;
}

TEST_F(CudaLoss, CrossEntropyForward) {
  for (const Case &c : kCases) {
    const auto logits = padded_logits(c, 81);
    const auto labels = random_ids(c.tokens, 82, 0, static_cast<int32_t>(c.valid));
    const float want = megart::cpu::cross_entropy_forward(logits.data(), labels.data(), c.tokens, c.vocab, c.valid);
    const DeviceArray<float> dlogits(logits);
    const DeviceArray<int32_t> dlabels(labels);
    DeviceArray<float> out(1);
    cross_entropy_forward(out.data(), dlogits.data(), dlabels.data(), c.tokens, c.vocab, c.valid);
    expect_near_all(out.get(), {want}, 1e-5f, 1e-6f, "cross_entropy_forward " + describe(c));
  }
}

TEST_F(CudaLoss, CrossEntropyBackward) {
  const float dloss = 0.7f;
  for (const Case &c : kCases) {
    const auto logits = padded_logits(c, 83);
    const auto labels = random_ids(c.tokens, 84, 0, static_cast<int32_t>(c.valid));
    std::vector<float> want(logits.size());
    megart::cpu::cross_entropy_backward(want.data(), dloss, logits.data(), labels.data(), c.tokens, c.vocab, c.valid);
    const DeviceArray<float> dlogits_in(logits);
    const DeviceArray<int32_t> dlabels(labels);
    DeviceArray<float> grad(random_floats(logits.size(), 85)); // padding columns must become 0
    cross_entropy_backward(grad.data(), dloss, dlogits_in.data(), dlabels.data(), c.tokens, c.vocab, c.valid);
    expect_near_all(grad.get(), want, 1e-5f, 1e-6f * dloss / c.tokens, "cross_entropy_backward " + describe(c));
  }
}

TEST_F(CudaLoss, CrossEntropyIsDeterministic) {
  const Case c{257, 3001, 3000};
  const DeviceArray<float> logits(padded_logits(c, 86));
  const DeviceArray<int32_t> labels(random_ids(c.tokens, 87, 0, static_cast<int32_t>(c.valid)));
  DeviceArray<float> out(1);
  cross_entropy_forward(out.data(), logits.data(), labels.data(), c.tokens, c.vocab, c.valid);
  const float first = read_scalar(out.data());
  cross_entropy_forward(out.data(), logits.data(), labels.data(), c.tokens, c.vocab, c.valid);
  EXPECT_EQ(read_scalar(out.data()), first);
}

TEST_F(CudaLoss, BadArgumentsThrow) {
  DeviceArray<float> logits(16), out(1);
  DeviceArray<int32_t> labels(2);
  EXPECT_THROW(cross_entropy_forward(out.data(), logits.data(), labels.data(), 2, 8, 0), megart::Error);
  EXPECT_THROW(cross_entropy_forward(out.data(), logits.data(), labels.data(), 2, 8, 9), megart::Error);
  EXPECT_THROW(cross_entropy_forward(out.data(), logits.data(), labels.data(), 0, 8, 8), megart::Error);
  EXPECT_THROW(cross_entropy_backward(logits.data(), 1.0f, logits.data(), labels.data(), 2, 8, 9), megart::Error);
}

TEST(CudaLossHost, ValidColumns) {
  // A vocabulary of 50 padded to 3 shards of 17.
  EXPECT_EQ(valid_columns(50, 0, 17), 17);
  EXPECT_EQ(valid_columns(50, 34, 17), 16);
  EXPECT_EQ(valid_columns(50, 51, 17), 0);
  EXPECT_EQ(valid_columns(50, 34, 17), megart::cpu::valid_columns(50, 34, 17));
}

// The vocabulary-parallel pieces on one shard: vocabulary 2997 padded to 3 shards of 1000; this
// is the last shard (start 2000, 997 valid columns). Labels come from the whole vocabulary, so
// some rows have their target here and most do not.
TEST_F(CudaLoss, ShardStatisticsMatchCpu) {
  const int64_t tokens = 33, local = 1000, start = 2000, valid = 997;
  const Case c{tokens, local, valid};
  const auto logits = padded_logits(c, 88);
  auto labels = random_ids(tokens, 89, 0, 2997);
  labels[0] = 2000; // first column of the share
  labels[1] = 2996; // last valid column
  const DeviceArray<float> dlogits(logits);
  const DeviceArray<int32_t> dlabels(labels);

  std::vector<float> want_max(tokens), want_sum(tokens), want_target(tokens);
  megart::cpu::logits_max(want_max.data(), logits.data(), tokens, local, valid);
  megart::cpu::logits_sum_exp(want_sum.data(), logits.data(), want_max.data(), tokens, local, valid);
  megart::cpu::target_logit(want_target.data(), logits.data(), labels.data(), tokens, local, start);

  DeviceArray<float> max(tokens), sum(tokens), target(random_floats(tokens, 90));
  logits_max(max.data(), dlogits.data(), tokens, local, valid);
  EXPECT_EQ(max.get(), want_max) << "logits_max (a max is exact)";
  logits_sum_exp(sum.data(), dlogits.data(), max.data(), tokens, local, valid);
  expect_near_all(sum.get(), want_sum, 1e-5f, 0.0f, "logits_sum_exp");
  target_logit(target.data(), dlogits.data(), dlabels.data(), tokens, local, start);
  EXPECT_EQ(target.get(), want_target) << "target_logit (a copy or 0)";

  // The loss and gradient from the CPU's statistics (as if all-reduced), so these two kernels
  // are checked on their own.
  const DeviceArray<float> cmax(want_max), csum(want_sum), ctarget(want_target);
  DeviceArray<float> loss(1);
  cross_entropy_from_stats(loss.data(), cmax.data(), csum.data(), ctarget.data(), tokens);
  const float want_loss = megart::cpu::cross_entropy_from_stats(want_max.data(), want_sum.data(), want_target.data(),
                                                                tokens);
  expect_near_all(loss.get(), {want_loss}, 1e-5f, 1e-6f, "cross_entropy_from_stats");

  const float dloss = 1.3f;
  std::vector<float> want_grad(tokens * local);
  megart::cpu::cross_entropy_backward_from_stats(want_grad.data(), dloss, logits.data(), labels.data(),
                                                 want_max.data(), want_sum.data(), tokens, local, start, valid);
  DeviceArray<float> grad(random_floats(want_grad.size(), 91)); // padding columns must become 0
  cross_entropy_backward_from_stats(grad.data(), dloss, dlogits.data(), dlabels.data(), cmax.data(), csum.data(),
                                    tokens, local, start, valid);
  expect_near_all(grad.get(), want_grad, 1e-5f, 1e-6f * dloss / tokens, "cross_entropy_backward_from_stats");
}

TEST_F(CudaLoss, MaxOfAnAllPaddingShardIsMinusInfinity) {
  const int64_t tokens = 3, local = 8;
  const DeviceArray<float> logits(random_floats(tokens * local, 92));
  DeviceArray<float> max(tokens);
  logits_max(max.data(), logits.data(), tokens, local, 0);
  for (float m : max.get())
    EXPECT_EQ(m, -std::numeric_limits<float>::infinity());
}

} // namespace
} // namespace megart::cuda::test
