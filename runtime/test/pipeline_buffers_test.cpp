// The pipeline executor's buffer pool plan (megart/pipeline_buffers.h), which the executor
// allocates up front and megac predicts a rank's memory with: a small schedule worked by hand.
#include "megart/pipeline_buffers.h"

#include <gtest/gtest.h>

using megart::PipelineBufferKind;

// Rank 0 of 1F1B over 2 stages and 2 microbatches: chunk 0 (no input) stashes 100 bytes and
// sends 40. Sent buffers stay taken to the end, so both outputs and the first received gradient
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
