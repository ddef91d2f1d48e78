// RUN: megac-opt %s -split-input-file --megac-autodiff --megac-pipeline-split --megac-data-parallel | FileCheck %s
// megac-data-parallel on a small hand-written model (differentiated by megac-autodiff first):
// the gradients are summed over the dp axis of @grid (axis 1) in flat buckets of at most the
// plan's ddp_bucket_size elements, the last parameters first (backward finishes them first).

// Four parameters of 128, 64, 32 and 128 elements, buckets of at most 200: [2, 3], [0, 1].
// CHECK-LABEL: func.func @sync_gradients_stage0()
// CHECK-NEXT:    %[[B0:.*]] = tx.grad_bucket params[2, 3] : tensor<160xf32>
// CHECK-NEXT:    %[[S0:.*]] = shard.all_reduce %[[B0]] on @grid grid_axes = [1] {megac.rule = "data parallel: gradient bucket 0 (b .. head)"} : tensor<160xf32> -> tensor<160xf32>
// CHECK-NEXT:    tx.set_grad_bucket %[[S0]] params[2, 3] : tensor<160xf32>
// CHECK-NEXT:    %[[B1:.*]] = tx.grad_bucket params[0, 1] : tensor<192xf32>
// CHECK-NEXT:    %[[S1:.*]] = shard.all_reduce %[[B1]] on @grid grid_axes = [1] {megac.rule = "data parallel: gradient bucket 1 (wte .. w)"}
// CHECK-NEXT:    tx.set_grad_bucket %[[S1]] params[0, 1]
// CHECK-NEXT:    return
shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 2, tp = 1, ddp_bucket_size = 200, overlap_grad_reduce = false>}
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
// CHECK-LABEL: func.func @chunk0_backward
// CHECK:         tx.cross_entropy_grad
// CHECK:         tx.param_grad {{.*}} : tensor<16x8xf32>
// CHECK:         tx.param_grad {{.*}} : tensor<4x8xf32>
// CHECK-NEXT:    tx.start_grad_sync params[2, 3]
// CHECK:         tx.param_grad {{.*}} : tensor<8x8xf32>
// CHECK-NEXT:    tx.embedding_grad
// CHECK:         tx.param_grad
// CHECK-NEXT:    tx.start_grad_sync params[0, 1]
// CHECK-LABEL: func.func @sync_gradients_stage0()
shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 2, tp = 1, ddp_bucket_size = 200, overlap_grad_reduce = true>}
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
// CHECK-LABEL: func.func @chunk0_backward
// CHECK-NOT:   sync_gradients
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1>}
func.func @forward(%ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %logits = tx.matmul %e, %wte transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// optim_grads (ZeRO-2): each bucket's gradients are added into a zeroed flat bucket as backward
// makes them (at the parameter's place in Megatron's layout: head at 0, b at 128, w at 192, the
// bucket padded to 256), reduce-scattered over dp right after its last one and added into this
// rank's gradient shard (bucket offset / 2); @sync_gradients keeps only the layout.
// CHECK-LABEL: func.func @chunk0_backward
// (Each rank's bucket is its part of a sum over dp, `partial={"dp"}`; reduce-scattered, a shard.)
// CHECK:         %[[G0:.*]] = tx.grad_bucket_init params[1, 3] {megac.sharding = #tx.sharding<[{}], partial={"dp"}>} : tensor<256xf32>
// CHECK-NEXT:    %[[G1:.*]] = tx.grad_bucket_add %[[G0]], %{{.*}} at 0 {{.*}} : tensor<256xf32>, tensor<16x8xf32>
// CHECK:         %[[G2:.*]] = tx.grad_bucket_add %[[G1]], %{{.*}} at 128 {{.*}} : tensor<256xf32>, tensor<4x8xf32>
// CHECK:         %[[G3:.*]] = tx.grad_bucket_add %[[G2]], %{{.*}} at 192 {{.*}} : tensor<256xf32>, tensor<8x8xf32>
// CHECK-NEXT:    %[[S0:.*]] = shard.reduce_scatter %[[G3]] on @grid grid_axes = [1] scatter_axis = 0 {megac.rule = "ZeRO-2 (optim_grads): reduce-scatter of this microbatch's gradient bucket 0 (w .. head, 256 elements with padding)", megac.sharding = #tx.sharding<[{"dp"}]>} : tensor<256xf32> -> tensor<128xf32>
// CHECK-NEXT:    tx.add_grad_shard %[[S0]] params[1, 3] at 0 : tensor<128xf32>
// CHECK-NEXT:    %[[E:.*]] = tx.embedding_grad
// CHECK:         %[[H0:.*]] = tx.grad_bucket_init params[0, 0] {{.*}} : tensor<128xf32>
// CHECK-NEXT:    %[[H1:.*]] = tx.grad_bucket_add %[[H0]], %[[E]] at 0
// CHECK-NEXT:    %[[S1:.*]] = shard.reduce_scatter %[[H1]] {{.*}} : tensor<128xf32> -> tensor<64xf32>
// CHECK-NEXT:    tx.add_grad_shard %[[S1]] params[0, 0] at 128 : tensor<64xf32>
// CHECK-NOT:     tx.param_grad
// CHECK-LABEL: func.func @sync_gradients_stage0() attributes {megac.flat_layout = {buckets = array<i64: 0, 256, 256, 128>, numel = 384 : i64, offloaded_numel = 0 : i64, param_offsets = array<i64: 256, 192, 128, 0>, shard_degree = 2 : i64, shard_numel = 192 : i64, sharding = "optim_grads"}, megac.role = #megac.role<sync_gradients>} {
// CHECK-NEXT:    return
// CHECK-LABEL: func.func @gather_params_stage0()
// CHECK:         shard.all_gather {{.*}} {megac.rule = "distributed optimizer (optim_grads): all-gather of the updated parameter bucket 0
shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 2, tp = 1, ddp_bucket_size = 200, data_parallel_sharding_strategy = "optim_grads">}
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

// optim_grads_params (ZeRO-3, resharding after forward without pp): before a parameter's first
// use in each chunk function, its bucket's shard (where this rank keeps it: bucket offset / 2) is
// all-gathered over dp and each parameter read as a view of the gathered bucket; the chunk's
// backward gathers again what it uses. Gradients as optim_grads; nothing gathered after
// the step.
// CHECK-LABEL: func.func @chunk0_forward
// (This rank's shard is split over dp, #tx.sharding<[{"dp"}]>; the gathered bucket whole.)
// CHECK:         %[[S1:.*]] = tx.local_param_shard params[0, 0] at 128 {megac.sharding = #tx.sharding<[{"dp"}]>} : tensor<64xf32>
// CHECK-NEXT:    %[[A1:.*]] = shard.all_gather %[[S1]] on @grid grid_axes = [1] gather_axis = 0 {megac.rule = "ZeRO-3 (optim_grads_params): all-gather of the parameter bucket 1 (wte .. wte)", megac.sharding = #tx.sharding<[{}]>} : tensor<64xf32> -> tensor<128xf32>
// CHECK-NEXT:    %[[WTE:.*]] = tx.bucket_param %[[A1]] at 0 : tensor<128xf32> -> tensor<16x8xf32>
// CHECK-NEXT:    tx.embedding %[[WTE]]
// CHECK:         %[[S0:.*]] = tx.local_param_shard params[1, 3] at 0 {{.*}} : tensor<128xf32>
// CHECK-NEXT:    %[[A0:.*]] = shard.all_gather %[[S0]] {{.*}} : tensor<128xf32> -> tensor<256xf32>
// CHECK-NEXT:    %[[W:.*]] = tx.bucket_param %[[A0]] at 192 : tensor<256xf32> -> tensor<8x8xf32>
// CHECK:         tx.matmul %{{.*}}, %[[W]]
// CHECK-LABEL: func.func @chunk0_backward
// CHECK:         %[[B0:.*]] = tx.local_param_shard params[1, 3] at 0 {{.*}} : tensor<128xf32>
// CHECK-NEXT:    shard.all_gather %[[B0]] {{.*}} {megac.rule = "ZeRO-3 (optim_grads_params): all-gather of the parameter bucket 0 (w .. head)",
// CHECK:         shard.reduce_scatter {{.*}} {megac.rule = "ZeRO-3 (optim_grads_params): reduce-scatter of this microbatch's gradient bucket 0
// CHECK-NOT:     tx.param_grad
// CHECK-LABEL: func.func @sync_gradients_stage0() attributes {megac.flat_layout = {{{.*}}sharding = "optim_grads_params"}, megac.role = #megac.role<sync_gradients>}
// CHECK-NOT:   func.func @gather_params_stage0
shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 2, tp = 1, ddp_bucket_size = 200, data_parallel_sharding_strategy = "optim_grads_params">}
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
