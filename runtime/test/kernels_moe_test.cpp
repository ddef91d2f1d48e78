// The mixture-of-experts kernels against their definitions written out in the test: the choice
// of experts (and its tie order), the order of the rows, the moves, the grouped GEMM against one
// GEMM per expert, the router's gradient against central differences of its forward.
#include "expect_error.h"
#include "megart/comm.h"
#include "megart/kernels.h"
#include "megart/program.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

namespace cpu = megart::cpu;

TEST(MoeKernels, RouteChoosesTheMostProbableAndBreaksTiesByLowerIndex) {
  // Token 0: experts 1 and 3 tie for the most probable; token 1: a clear order 2, 0.
  const std::vector<float> logits = {0.0f, 2.0f, -1.0f, 2.0f, /**/ 1.0f, -3.0f, 4.0f, 0.5f};
  std::vector<float> probs(8), weights(4), raw(4);
  std::vector<int32_t> experts(4);
  cpu::moe_route_forward(probs.data(), experts.data(), weights.data(), logits.data(), 2, 4, 2, false);
  EXPECT_EQ(experts, (std::vector<int32_t>{1, 3, 2, 0}));
  EXPECT_FLOAT_EQ(weights[0], 0.5f); // renormalised: equal probabilities share 1
  EXPECT_FLOAT_EQ(weights[0] + weights[1], 1.0f);
  EXPECT_FLOAT_EQ(weights[2] + weights[3], 1.0f);
  cpu::moe_route_forward(probs.data(), experts.data(), raw.data(), logits.data(), 2, 4, 2, true);
  EXPECT_FLOAT_EQ(raw[2], probs[4 + 2]); // pre_softmax: the probability as it is
  EXPECT_LT(raw[0] + raw[1], 1.0f);
}

TEST(MoeKernels, AssignOrdersByExpertThenTokenThenChoice) {
  const std::vector<int32_t> experts = {2, 0, /**/ 0, 1, /**/ 2, 1};
  std::vector<int32_t> rows(6), counts(3);
  cpu::moe_assign(rows.data(), counts.data(), experts.data(), 3, 2, 3);
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 2, 2}));
  // expert 0: (t0, j1), (t1, j0); expert 1: (t1, j1), (t2, j1); expert 2: (t0, j0), (t2, j0).
  EXPECT_EQ(rows, (std::vector<int32_t>{4, 0, 1, 2, 5, 3}));
  const std::vector<int32_t> outside = {0, 3};
  expect_error([&] { cpu::moe_assign(rows.data(), counts.data(), outside.data(), 1, 2, 3); },
               {"moe_assign", "expert 3", "outside [0, 3)"});
}

TEST(MoeKernels, ScatterThenWeightedGatherSumsEachTokensChoices) {
  const std::vector<int32_t> rows = {3, 0, 1, 2};
  const std::vector<float> x = {1, 2, /**/ 3, 4}, w = {0.25f, 0.75f, 0.5f, 0.5f};
  std::vector<float> moved(8), back(4);
  cpu::moe_scatter(moved.data(), x.data(), rows.data(), 2, 2, 2);
  EXPECT_EQ(moved, (std::vector<float>{1, 2, 3, 4, 3, 4, 1, 2}));
  cpu::moe_gather_weighted(back.data(), moved.data(), rows.data(), w.data(), 2, 2, 2);
  EXPECT_EQ(back, x); // the weights of each token sum to 1
  const std::vector<int32_t> bad = {0, 4, 1, 2};
  expect_error([&] { cpu::moe_gather(back.data(), moved.data(), bad.data(), 2, 2, 2); }, {"row 4", "[0, 4)"});
}

TEST(MoeKernels, GroupedGemmIsOneGemmPerExpertAndItsWeightGradient) {
  // 5 rows: expert 0 has 2, expert 1 none, expert 2 has 3; [rows, 3] x [experts, 4, 3] transposed.
  const int64_t rows = 5, k = 3, n = 4;
  const std::vector<int32_t> counts = {2, 0, 3};
  std::vector<float> a(rows * k), w(3 * n * k), c(rows * n), expected(rows * n);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = 0.05f * static_cast<float>(i % 11) - 0.2f;
  cpu::grouped_gemm(c.data(), a.data(), w.data(), counts.data(), 3, 3, rows, k, n, true);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t e = r < 2 ? 0 : 2;
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < k; ++i)
        sum += double(a[r * k + i]) * w[e * n * k + j * k + i];
      EXPECT_NEAR(c[r * n + j], sum, 1e-6) << "row " << r << " column " << j;
    }
  }
  std::vector<float> dw(3 * n * k, 7.0f);
  cpu::grouped_gemm_weight_grad(dw.data(), a.data(), c.data(), counts.data(), 3, 3, rows, k, n, true);
  for (int64_t j = 0; j < n * k; ++j)
    EXPECT_EQ(dw[n * k + j], 0.0f) << "expert 1 has no rows: zeros";
  double d = 0; // expert 2's [j=1, i=2]: sum over its rows of c[r, 1] a[r, 2]
  for (int64_t r = 2; r < rows; ++r)
    d += double(c[r * n + 1]) * a[r * k + 2];
  EXPECT_NEAR(dw[2 * n * k + 1 * k + 2], d, 1e-6);
  const std::vector<int32_t> long_counts = {2, 1, 3};
  expect_error([&] { cpu::grouped_gemm(c.data(), a.data(), w.data(), long_counts.data(), 3, 3, rows, k, n, true); },
               {"grouped_gemm", "sum to 6", "more than the 5 rows"});
}

TEST(MoeKernels, GroupedGemmSegmentsCycleThroughTheExpertsAndPaddingIsZero) {
  // Expert parallelism's received rows: 2 senders x 2 local experts = 4 segments (1, 2, 0, 1 rows)
  // in 6 rows, the last 2 padding. Segment s uses expert s mod 2; each expert's weight gradient
  // sums its segments.
  const int64_t rows = 6, k = 2, n = 3;
  const std::vector<int32_t> counts = {1, 2, 0, 1};
  std::vector<float> a(rows * k), w(2 * k * n), c(rows * n, 9.0f), dc(rows * n, 1.0f), dw(2 * k * n, 5.0f);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = 0.5f * static_cast<float>(i) - 1.0f;
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = 0.25f * static_cast<float>(i % 5) - 0.5f;
  cpu::grouped_gemm(c.data(), a.data(), w.data(), counts.data(), 4, 2, rows, k, n, false);
  const int64_t expert_of_row[] = {0, 1, 1, 1};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t i = 0; r < 4 && i < k; ++i)
        sum += double(a[r * k + i]) * w[expert_of_row[r] * k * n + i * n + j];
      EXPECT_NEAR(c[r * n + j], sum, 1e-6) << "row " << r << " column " << j << (r >= 4 ? " (padding)" : "");
    }
  cpu::grouped_gemm_weight_grad(dw.data(), a.data(), dc.data(), counts.data(), 4, 2, rows, k, n, false);
  for (int64_t i = 0; i < k; ++i) { // dC is ones: dW[e][i, j] = the sum of column i of e's rows
    EXPECT_NEAR(dw[0 * k * n + i * n], a[0 * k + i], 1e-6);
    EXPECT_NEAR(dw[1 * k * n + i * n], a[1 * k + i] + a[2 * k + i] + a[3 * k + i], 1e-6);
  }
  const std::vector<int32_t> too_many = {3, 2, 1, 1};
  expect_error([&] { cpu::grouped_gemm(c.data(), a.data(), w.data(), too_many.data(), 4, 2, rows, k, n, false); },
               {"grouped_gemm", "sum to 7", "more than the 6 rows"});
}

TEST(MoeKernels, DropKeepsEachExpertsCapacityByWeightOrPosition) {
  // 4 tokens x top 2 over 3 experts; expert 0 is chosen by all 4 tokens, capacity 2.
  const std::vector<int32_t> experts = {0, 1, /**/ 0, 2, /**/ 1, 0, /**/ 0, 2};
  const std::vector<float> weights = {0.6f, 0.4f, /**/ 0.9f, 0.1f, /**/ 0.5f, 0.5f, /**/ 0.9f, 0.1f};
  std::vector<int32_t> kept(8), rows(8), counts(3);
  std::vector<float> mask(8);
  cpu::moe_drop(kept.data(), mask.data(), experts.data(), weights.data(), 4, 2, 3, 2, false);
  // By weight: tokens 1 and 3 (0.9, the earlier first among equals) keep expert 0; 0 and 2 lose it.
  EXPECT_EQ(kept, (std::vector<int32_t>{-1, 1, 0, 2, 1, -1, 0, 2}));
  EXPECT_EQ(mask, (std::vector<float>{0, 1, 1, 1, 1, 0, 1, 1}));
  cpu::moe_drop(kept.data(), mask.data(), experts.data(), weights.data(), 4, 2, 3, 2, true);
  EXPECT_EQ(kept, (std::vector<int32_t>{0, 1, 0, 2, 1, -1, -1, 2})) << "by position: tokens 0 and 1 keep it";
  // The dropped choices' rows come after the experts' 2 + 2 + 2 and are not counted.
  cpu::moe_assign(rows.data(), counts.data(), kept.data(), 4, 2, 3);
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 2, 2}));
  EXPECT_EQ(rows, (std::vector<int32_t>{0, 2, 1, 4, 3, 6, 7, 5}));
  const std::vector<int32_t> bad = {0, 3, 0, 2, 1, 0, 0, 2};
  expect_error([&] { cpu::moe_drop(kept.data(), mask.data(), bad.data(), weights.data(), 4, 2, 3, 2, false); },
               {"moe_drop", "expert 3", "outside [0, 3)"});
}

TEST(MoeKernels, ExpertExchangesOnOneRankMoveTheRowsAndPad) {
  megart::SelfCommunicator self;
  megart::StepContext ctx;
  ctx.ep = &self;
  const std::vector<int32_t> counts = {1, 2};
  std::vector<int32_t> received(2);
  cpu::moe_exchange_counts(ctx, received.data(), counts.data(), 2);
  EXPECT_EQ(received, counts);
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6}; // 3 rows of 2
  std::vector<float> out(8, 7.0f), back(6);
  cpu::moe_dispatch(ctx, out.data(), rows.data(), counts.data(), received.data(), 2, 3, 4, 2);
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 5, 6, 0, 0}));
  cpu::moe_combine(ctx, back.data(), out.data(), counts.data(), received.data(), 2, 3, 4, 2);
  EXPECT_EQ(back, rows);
  megart::StepContext none;
  expect_error([&] { cpu::moe_exchange_counts(none, received.data(), counts.data(), 2); },
               {"moe_exchange_counts", "no expert-parallel communicator"});
}

TEST(MoeKernels, RouteBackwardIsTheDerivativeOfItsForward) {
  const std::vector<float> logits = {0.3f, -0.2f, 0.9f, 0.1f, /**/ -0.5f, 0.4f, 0.2f, 1.1f};
  const std::vector<float> dprobs = {0.1f, -0.3f, 0.2f, 0.05f, /**/ 0.0f, 0.4f, -0.1f, 0.2f},
                           dweights = {0.7f, -0.4f, /**/ 0.3f, 0.9f};
  for (bool pre : {false, true}) {
    std::vector<float> probs(8), weights(4), d(8);
    std::vector<int32_t> experts(4);
    cpu::moe_route_forward(probs.data(), experts.data(), weights.data(), logits.data(), 2, 4, 2, pre);
    cpu::moe_route_backward(d.data(), dprobs.data(), dweights.data(), probs.data(), experts.data(), weights.data(), 2,
                            4, 2, pre);
    // L = dprobs . probs + dweights . weights, by central differences (the choice stays put).
    for (int64_t i = 0; i < 8; ++i) {
      double side[2];
      for (int s = 0; s < 2; ++s) {
        std::vector<float> l = logits, p(8), wt(4);
        std::vector<int32_t> e(4);
        l[i] += s ? -1e-3f : 1e-3f;
        cpu::moe_route_forward(p.data(), e.data(), wt.data(), l.data(), 2, 4, 2, pre);
        ASSERT_EQ(e, experts);
        double sum = 0;
        for (int64_t j = 0; j < 8; ++j)
          sum += double(dprobs[j]) * p[j];
        for (int64_t j = 0; j < 4; ++j)
          sum += double(dweights[j]) * wt[j];
        side[s] = sum;
      }
      EXPECT_NEAR(d[i], (side[0] - side[1]) / 2e-3, 2e-3) << "logit " << i << (pre ? " (pre_softmax)" : "");
    }
  }
}

} // namespace
