// RUN: megac-opt %s -split-input-file --megac-autodiff --megac-data-parallel | FileCheck %s
// megac-data-parallel on a small hand-written model (differentiated by megac-autodiff first):
// the gradients are summed over the dp axis of @grid (axis 1) in flat buckets of at most the
// plan's ddp_bucket_size elements, the last parameters first (backward finishes them first).

// Four parameters of 128, 64, 32 and 128 elements, buckets of at most 200: [2, 3], [0, 1].
// CHECK-LABEL: func.func @sync_gradients()
// CHECK-NEXT:    %[[B0:.*]] = tx.grad_bucket params[2, 3] : tensor<160xf32>
// CHECK-NEXT:    %[[S0:.*]] = shard.all_reduce %[[B0]] on @grid grid_axes = [1] {megac.rule = "data parallel: gradient bucket 0 (b .. head)"} : tensor<160xf32> -> tensor<160xf32>
// CHECK-NEXT:    tx.set_grad_bucket %[[S0]] params[2, 3] : tensor<160xf32>
// CHECK-NEXT:    %[[B1:.*]] = tx.grad_bucket params[0, 1] : tensor<192xf32>
// CHECK-NEXT:    %[[S1:.*]] = shard.all_reduce %[[B1]] on @grid grid_axes = [1] {megac.rule = "data parallel: gradient bucket 1 (wte .. w)"}
// CHECK-NEXT:    tx.set_grad_bucket %[[S1]] params[0, 1]
// CHECK-NEXT:    return
shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = {ddp_bucket_size = 200, overlap_grad_reduce = false}}
func.func @forward(%ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %w = tx.param "w" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %h = tx.matmul %e, %w : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %b = tx.param "b" role norm init(zeros) : tensor<4x8xf32>
  %hb = tx.add %h, %b : tensor<2x4x8xf32>, tensor<4x8xf32>
  %head = tx.param "head" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %logits = tx.matmul %hb, %head transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// overlap_grad_reduce: each tx.param_grad moves up to where its gradient is made, and each
// bucket starts right after the last gradient of its parameters.
// CHECK-LABEL: func.func @train_step
// CHECK:         tx.cross_entropy_grad
// CHECK:         tx.param_grad {{.*}} : tensor<16x8xf32>
// CHECK:         tx.param_grad {{.*}} : tensor<4x8xf32>
// CHECK-NEXT:    tx.start_grad_sync params[2, 3]
// CHECK:         tx.param_grad {{.*}} : tensor<8x8xf32>
// CHECK-NEXT:    tx.embedding_grad
// CHECK-NEXT:    tx.param_grad
// CHECK-NEXT:    tx.start_grad_sync params[0, 1]
// CHECK-LABEL: func.func @sync_gradients()
shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = {ddp_bucket_size = 200, overlap_grad_reduce = true}}
func.func @forward(%ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %w = tx.param "w" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %h = tx.matmul %e, %w : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %b = tx.param "b" role norm init(zeros) : tensor<4x8xf32>
  %hb = tx.add %h, %b : tensor<2x4x8xf32>, tensor<4x8xf32>
  %head = tx.param "head" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %logits = tx.matmul %hb, %head transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Without data parallelism there is nothing to sum.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT:   sync_gradients
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = {}}
func.func @forward(%ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %logits = tx.matmul %e, %wte transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
