// RUN: megac-opt %s --megac-derive-steps -split-input-file -verify-diagnostics | FileCheck %s
// megac-derive-steps on hand-written training steps: @eval_step is the forward up to the loss,
// @logits_step (one rank, fp32 logits) the same returning the logits.

// One rank, fp32: both steps, after @train_step. What only the backward reads (%saved) goes.
// CHECK-LABEL: func.func @train_step(
// CHECK:         tx.cross_entropy_grad
// CHECK-LABEL: func.func @eval_step(
// CHECK-SAME:    -> tensor<f32> attributes {megac.role = #megac.role<eval_step>}
// CHECK-NEXT:    %[[W:.*]] = tx.param "wte"
// CHECK-NEXT:    %[[E:.*]] = tx.embedding %[[W]]
// CHECK-NEXT:    %[[H:.*]] = tx.gelu %[[E]]
// CHECK-NEXT:    %[[Y:.*]] = tx.matmul %[[H]], %[[W]] transpose_rhs
// CHECK-NEXT:    %[[L:.*]] = tx.cross_entropy %[[Y]]
// CHECK-NEXT:    return %[[L]] : tensor<f32>
// CHECK-LABEL: func.func @logits_step(
// CHECK-SAME:    -> tensor<4x8xf32> attributes {megac.role = #megac.role<logits_step>}
// CHECK:         %[[Y:.*]] = tx.matmul
// CHECK-NEXT:    return %[[Y]] : tensor<4x8xf32>
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1>}
func.func @train_step(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) -> tensor<f32> attributes {megac.role = #megac.role<train_step>} {
  %w = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %w[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  %saved = tx.add %e, %e : tensor<4x8xf32>, tensor<4x8xf32>
  %h = tx.gelu %e (tanh) : tensor<4x8xf32>
  %y = tx.matmul %h, %w transpose_rhs : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  %dy = tx.cross_entropy_grad %dloss, %y, %labels : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %dw = tx.matmul %dy, %saved transpose_lhs : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  tx.param_grad %dw to %w : tensor<8x8xf32>
  return %loss : tensor<f32>
}

// -----

// Data parallel: the logits are one rank's share of the batch, so no @logits_step.
// CHECK-LABEL: func.func @train_step(
// CHECK-LABEL: func.func @eval_step(
// CHECK-NOT:   @logits_step
shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 2, tp = 1>}
func.func @train_step(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) -> tensor<f32> attributes {megac.role = #megac.role<train_step>} {
  %w = tx.param "wte" init(normal) : tensor<4x8xf32>
  %loss = tx.cross_entropy %w, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// 16-bit logits: generation reads fp32, so no @logits_step.
// CHECK-LABEL: func.func @eval_step(
// CHECK-NOT:   @logits_step
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, activation_precision = "bf16">}
func.func @train_step(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) -> tensor<f32> attributes {megac.role = #megac.role<train_step>} {
  %w = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %w[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xbf16>
  %loss = tx.cross_entropy %e, %labels : tensor<4x8xbf16>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A pipelined program (chunks, no @train_step) evaluates with its chunks' forwards: unchanged.
// CHECK-LABEL: func.func @chunk0_forward(
// CHECK-NOT:   @eval_step
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1>}
func.func @chunk0_forward(%ids: tensor<4xi32>, %labels: tensor<4xi32>) -> tensor<f32> attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>, megac.stash = 0 : i64} {
  %w = tx.param "wte" init(normal) : tensor<4x8xf32>
  %loss = tx.cross_entropy %w, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1>}
// expected-error @+1 {{'func.func' op the returned loss must be computed in the step's body}}
func.func @train_step(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) -> tensor<f32> attributes {megac.role = #megac.role<train_step>} {
  return %dloss : tensor<f32>
}
