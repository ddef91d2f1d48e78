// RUN: megac-opt %s -split-input-file --megac-autodiff --megac-pipeline-split -verify-diagnostics | FileCheck %s
// megac-pipeline-split on a small hand-written model (differentiated by megac-autodiff first):
// two layers over pp 2 (pipeline_layout 1, 1 in the plan). Chunk 0 gets the embedding and layer
// 0, chunk 1 layer 1, the head and the loss; only the residual stream crosses between them (and
// its gradient back); each chunk's backward reads what its forward stashed; the word embedding,
// tied to the head, gets one gradient contribution in each chunk.

// CHECK-NOT:   @train_step
// CHECK-LABEL: func.func @chunk0_forward(%{{.*}}: tensor<2x4xi32>, %{{.*}}: tensor<2x4xi32>)
// CHECK-SAME:    -> (tensor<2x4x8xf32>, {{.*}}) attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>, megac.stash = [[STASH0:[0-9]+]] : i64}
// CHECK:         tx.embedding
// CHECK:         call @layer_forward
// CHECK-NOT:     call
// CHECK:         return
// CHECK-LABEL: func.func @chunk0_backward(%{{.*}}: tensor<2x4xi32>, %{{.*}}: tensor<2x4xi32>, %{{.*}}: tensor<f32>,
// CHECK-SAME:    %[[OUT_GRAD0:[a-z0-9]+]]: tensor<2x4x8xf32>) attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_backward>, megac.stash = [[STASH0]] : i64}
// CHECK:         call @layer_backward({{.*}}%[[OUT_GRAD0]])
// CHECK:         tx.embedding_grad
// CHECK:         tx.param_grad {{.*}} : tensor<16x8xf32>
// CHECK:         return{{$}}
// CHECK-LABEL: func.func @chunk1_forward(
// CHECK-SAME:    %{{.*}}: tensor<2x4xi32>, %{{.*}}: tensor<2x4xi32>, %[[IN:.*]]: tensor<2x4x8xf32>) -> (tensor<f32>,
// CHECK:         call @layer_forward(%[[IN]],
// CHECK:         tx.cross_entropy
// CHECK-LABEL: func.func @chunk1_backward(
// CHECK:         tx.cross_entropy_grad
// CHECK:         %[[IN_GRAD:.*]]:2 = call @layer_backward
// CHECK:         tx.param_grad {{.*}} : tensor<16x8xf32>
// CHECK:         return %[[IN_GRAD]]#0 : tensor<2x4x8xf32>
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_layout = [1, 1], pipeline_schedule = "1f1b">}
func.func private @layer(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x4x8xf32> {
  %h = tx.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %g = tx.gelu %h (tanh) : tensor<2x4x8xf32>
  %r = tx.add %x, %g : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}
func.func @forward(%ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %w0 = tx.param "h.0.w" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %x1 = call @layer(%e, %w0) : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %w1 = tx.param "h.1.w" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %x2 = call @layer(%x1, %w1) : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %logits = tx.matmul %x2, %wte transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// pp = 1 is one stage with one chunk: every op in chunk 0, the whole forward's values its
// backward reads stashed, no @train_step left.
// CHECK-NOT:   @train_step
// CHECK-LABEL: func.func @chunk0_forward(
// CHECK-SAME:    -> (tensor<f32>, {{.*}}) attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>, megac.stash = {{[1-9]}}
// CHECK:         tx.cross_entropy
// CHECK-LABEL: func.func @chunk0_backward(
// CHECK-SAME:    megac.chunk = 0 : i64, megac.role = #megac.role<chunk_backward>
// CHECK:         tx.param_grad
// CHECK-NOT:   @train_step
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1>}
func.func @forward(%ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %logits = tx.matmul %e, %wte transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The plan's layout must place every layer the model calls.
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_layout = [1, 2], pipeline_schedule = "1f1b">}
func.func private @layer(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %g = tx.gelu %x (tanh) : tensor<2x4x8xf32>
  return %g : tensor<2x4x8xf32>
}
// expected-error @below {{'func.func' op calls 2 transformer layers but the plan's pipeline_layout places 3}}
func.func @forward(%ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %x1 = call @layer(%e) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %x2 = call @layer(%x1) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %logits = tx.matmul %x2, %wte transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+2 {{megac.plan's pipeline_layout has 3 entries; it needs pp x num_virtual_stages_per_pipeline_rank = 2 (one per chunk)}}
module {
  shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_layout = [1, 1, 1], pipeline_schedule = "1f1b">}
  func.func @forward(%ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> tensor<f32> {
    %wte = tx.param "wte" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
    %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %logits = tx.matmul %e, %wte transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
    %loss = tx.cross_entropy %logits, %labels : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
