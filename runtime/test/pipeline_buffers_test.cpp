// The pipeline executor's buffer pool plan (megart/pipeline_buffers.h), which the executor
// allocates up front and megac predicts a rank's memory with: a small schedule worked by hand.
#include "megart/pipeline_buffers.h"

#include <gtest/gtest.h>

using megart::PipelineBufferKind;

// Rank 0 of 1F1B over 2 stages and 2 microbatches: chunk 0 (no input) stashes 100 bytes and
// sends 40. Given no reclaim steps, sent buffers stay taken to the end, so both outputs and the first received gradient
// are live together (3 x 40); the second gradient reuses the first's buffer; both stashes are
// live at once (2 x 100); two channels (activations out, gradients in) take a float each.
TEST(PipelineBuffers, OneFOneBFirstStageByHand) {
  const std::vector<megart::PipelineStep> steps = {
      {0, 0, -1}, {2, 0, 1}, {0, 0, -1}, {2, 0, 1}, {5, 0, 1}, {1, 0, -1}, {5, 0, 1}, {1, 0, -1}};
  const megart::PipelineBufferPlan plan = megart::plan_pipeline_buffers(steps, {{0, 100, 0, 40}}, 2);
  EXPECT_EQ(plan.count.at({PipelineBufferKind::Activations, 100}), 2);
  EXPECT_EQ(plan.count.at({PipelineBufferKind::Communication, 40}), 3);
  EXPECT_EQ(plan.channel_bytes, 8);
  EXPECT_EQ(plan.bytes(PipelineBufferKind::Activations), 200);
  EXPECT_EQ(plan.bytes(PipelineBufferKind::Communication), 128);
}

// The last of 2 chunks (no output): a received activation is given back by its forward, so the
// second microbatch's input reuses it; each backward's input gradient is sent and stays taken.
TEST(PipelineBuffers, LastStageReusesReceivedInputs) {
  const std::vector<megart::PipelineStep> steps = {{3, 1, 0}, {0, 1, -1}, {1, 1, -1}, {4, 1, 0},
                                                   {3, 1, 0}, {0, 1, -1}, {1, 1, -1}, {4, 1, 0}};
  const megart::PipelineBufferPlan plan = megart::plan_pipeline_buffers(steps, {{1, 64, 40, 0}}, 2);
  EXPECT_EQ(plan.count.at({PipelineBufferKind::Activations, 64}), 1);
  // Inputs and input gradients share a size: input 1 (back after F), input gradient 1 (sent),
  // input 2 reuses input 1, input gradient 2 is new.
  EXPECT_EQ(plan.count.at({PipelineBufferKind::Communication, 40}), 2);
  EXPECT_EQ(plan.bytes(PipelineBufferKind::Communication), 2 * 40 + 8);
}

// 1F1B over 2 stages and 4 microbatches, both stages' steps (kinds: F 0, B 1, sA 2, rA 3, sG 4,
// rG 5). Stage 0 learns that stage 1 has its activation k when gradient k arrives (stage 1 sent
// it after receiving activation k), so activation k's buffer comes back before B k. Stage 1
// learns that stage 0 has gradient k when activation k + 2 arrives (sent after stage 0 received
// gradient k); the last two gradients come back only at the end.
TEST(PipelineBuffers, SentBuffersComeBackOnceTheReceiverIsKnownToHaveThem) {
  const std::vector<megart::PipelineStep> first = {
      {0, 0, -1}, {2, 0, 1}, {0, 0, -1}, {2, 0, 1}, {5, 0, 1}, {1, 0, -1}, {0, 0, -1}, {2, 0, 1},
      {5, 0, 1},  {1, 0, -1}, {0, 0, -1}, {2, 0, 1}, {5, 0, 1}, {1, 0, -1}, {5, 0, 1}, {1, 0, -1}};
  std::vector<megart::PipelineStep> second;
  for (int m = 0; m < 4; ++m)
    second.insert(second.end(), {{3, 1, 0}, {0, 1, -1}, {1, 1, -1}, {4, 1, 0}});
  const std::vector<std::vector<int64_t>> reclaim = megart::send_reclaim_steps({first, second});
  const std::vector<int64_t> before_backward = {-1, 5, -1, 9, -1, -1, -1, 13, -1, -1, -1, 15, -1, -1, -1, -1};
  EXPECT_EQ(reclaim[0], before_backward);
  const std::vector<int64_t> after_two_more = {-1, -1, -1, 9, -1, -1, -1, 13, -1, -1, -1, 16, -1, -1, -1, 16};
  EXPECT_EQ(reclaim[1], after_two_more);

  // Stage 0 holds 3 buffers of 40 bytes (two outputs and a gradient) instead of 5 (all four
  // outputs until the end, and a gradient).
  const megart::PipelineBufferPlan kept = megart::plan_pipeline_buffers(first, {{0, 100, 0, 40}}, 2, reclaim[0]);
  const megart::PipelineBufferPlan atEnd = megart::plan_pipeline_buffers(first, {{0, 100, 0, 40}}, 2);
  EXPECT_EQ(kept.count.at({PipelineBufferKind::Communication, 40}), 3);
  EXPECT_EQ(atEnd.count.at({PipelineBufferKind::Communication, 40}), 5);
}

// A schedule that cannot finish (stage 1 waits for an activation stage 0 never sends): every
// send comes back at the end, as without the analysis.
TEST(PipelineBuffers, DeadlockedSchedulesKeepSentBuffersToTheEnd) {
  const std::vector<megart::PipelineStep> first = {{5, 0, 1}, {0, 0, -1}, {2, 0, 1}};
  const std::vector<megart::PipelineStep> second = {{3, 1, 0}, {4, 1, 0}};
  const std::vector<std::vector<int64_t>> reclaim = megart::send_reclaim_steps({first, second});
  EXPECT_EQ(reclaim[0], (std::vector<int64_t>{-1, -1, 3}));
  EXPECT_EQ(reclaim[1], (std::vector<int64_t>{-1, 2}));
}
