// RUN: megac-opt %s --megac-derive-steps -split-input-file -verify-diagnostics | FileCheck %s
// megac-derive-steps on hand-written chunk functions: with one rank and fp32 logits,
// @logits_step is the one chunk's forward returning the logits instead of the loss and its stash.

// One rank, fp32: what only the stash reads (%saved) goes; the chunk itself is unchanged.
// CHECK-LABEL: func.func @chunk0_forward(
// CHECK:         tx.add
// CHECK-LABEL: func.func @logits_step(
// CHECK-SAME:    -> tensor<4x8xf32> attributes {megac.role = #megac.role<logits_step>}
// CHECK-NEXT:    %[[W:.*]] = tx.param "wte"
// CHECK-NEXT:    %[[E:.*]] = tx.embedding %[[W]]
// CHECK-NEXT:    %[[H:.*]] = tx.gelu %[[E]]
// CHECK-NEXT:    %[[Y:.*]] = tx.matmul %[[H]], %[[W]] transpose_rhs
// CHECK-NEXT:    return %[[Y]] : tensor<4x8xf32>
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1>}
func.func @chunk0_forward(%ids: tensor<4xi32>, %labels: tensor<4xi32>) -> (tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>) attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>, megac.stash = 2 : i64} {
  %w = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %w[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  %saved = tx.add %e, %e : tensor<4x8xf32>, tensor<4x8xf32>
  %h = tx.gelu %e (tanh) : tensor<4x8xf32>
  %y = tx.matmul %h, %w transpose_rhs : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  return %loss, %saved, %y : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Data parallel: the logits are one rank's share of the batch, so no @logits_step.
// CHECK-LABEL: func.func @chunk0_forward(
// CHECK-NOT:   @logits_step
shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 2, tp = 1>}
func.func @chunk0_forward(%ids: tensor<4xi32>, %labels: tensor<4xi32>) -> tensor<f32> attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>, megac.stash = 0 : i64} {
  %w = tx.param "wte" init(normal) : tensor<4x8xf32>
  %loss = tx.cross_entropy %w, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// 16-bit logits: generation reads fp32, so no @logits_step.
// CHECK-LABEL: func.func @chunk0_forward(
// CHECK-NOT:   @logits_step
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, activation_precision = "bf16">}
func.func @chunk0_forward(%ids: tensor<4xi32>, %labels: tensor<4xi32>) -> tensor<f32> attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>, megac.stash = 0 : i64} {
  %w = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %w[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xbf16>
  %loss = tx.cross_entropy %e, %labels : tensor<4x8xbf16>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Pipeline parallelism: no stage holds the whole model, so no @logits_step.
// CHECK-LABEL: func.func @chunk0_forward(
// CHECK-NOT:   @logits_step
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_layout = [1, 1], pipeline_schedule = "1f1b">}
func.func @chunk0_forward(%ids: tensor<4xi32>, %labels: tensor<4xi32>) -> tensor<4x8xf32> attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>, megac.stash = 0 : i64} {
  %w = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %w[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  return %e : tensor<4x8xf32>
}

// -----

shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1>}
// expected-error @+1 {{'func.func' op the returned loss must be computed in the function's body}}
func.func @chunk0_forward(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %loss: tensor<f32>) -> tensor<f32> attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>, megac.stash = 0 : i64} {
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{megac-derive-steps: needs @chunk0_forward (megac-pipeline-split)}}
module {
  shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1>}
}
