// RUN: megac-opt %s --megac-shard-propagate --megac-shard-partition=axes=tp | FileCheck %s
// The partition of tp from megac-shard-propagate's shardings: the collectives each op's factors
// need, one per value and needed sharding, then the types per rank along tp.

// tp 2 with sequence parallelism: the residual stream split on the sequence; the column-parallel
// GEMM needs its input whole (Megatron's f: an all-gather along the sequence), the row-parallel
// GEMM leaves partial sums, reduce-scattered along the sequence into the residual add (g).
// CHECK-LABEL: func.func private @layer(
// CHECK-SAME:    tensor<4x8x32xf32> {megac.sharding = #tx.sharding<[{}, {"tp"}, {}]>}
// CHECK-SAME:    tensor<32x32xf32> {megac.sharding = #tx.sharding<[{}, {"tp"}]>}
// CHECK-SAME:    tensor<32x32xf32> {megac.sharding = #tx.sharding<[{"tp"}, {}]>}
// CHECK-SAME:    -> (tensor<4x8x32xf32> {megac.sharding = #tx.sharding<[{}, {"tp"}, {}]>})
// CHECK:         %[[N:.*]] = tx.rms_norm {{.*}} : tensor<4x8x32xf32>
// CHECK-NEXT:    %[[G:.*]] = shard.all_gather %[[N]] on @grid grid_axes = [2] gather_axis = 1 {megac.rule = "split over tp along dimension 1, gathered whole for tx.matmul", megac.sharding = #tx.sharding<[{}, {}, {}]>} : tensor<4x8x32xf32> -> tensor<4x16x32xf32>
// CHECK-NEXT:    tx.matmul %[[G]], {{.*}} -> tensor<4x16x32xf32>
// CHECK-NEXT:    tx.gelu
// CHECK-NEXT:    %[[O:.*]] = tx.matmul {{.*}} partial={"tp"}>} : tensor<4x16x32xf32>, tensor<32x32xf32> -> tensor<4x16x32xf32>
// CHECK-NEXT:    %[[S:.*]] = shard.reduce_scatter %[[O]] on @grid grid_axes = [2] scatter_axis = 1 {megac.rule = "row-parallel output (Megatron's g): partial sums over tp reduce-scattered before tx.add"{{.*}} -> tensor<4x8x32xf32>
// CHECK-NEXT:    tx.add %{{.*}}, %[[S]]

// The model: the vocabulary-parallel embedding's partial sums reduce-scattered into the layer's
// sequence-split input; the logits, split on the vocabulary, gathered whole for cross-entropy
// (Megatron's vocabulary-parallel cross-entropy is a decomposition still to come).
// CHECK-LABEL: func.func @forward(
// CHECK:         %[[E:.*]] = tx.embedding {{.*}} partial={"tp"}>}
// CHECK-NEXT:    %[[ES:.*]] = shard.reduce_scatter %[[E]] {{.*}} scatter_axis = 1 {megac.rule = "vocab-parallel embedding: partial sums over tp reduce-scattered before func.call"
// CHECK-NEXT:    call @layer(%[[ES]],
// CHECK:         %[[L:.*]] = tx.matmul {{.*}} transpose_rhs {{.*}} -> tensor<4x16x32xf32>
// CHECK-NEXT:    %[[LG:.*]] = shard.all_gather %[[L]] {{.*}} gather_axis = 2 {{.*}} : tensor<4x16x32xf32> -> tensor<4x16x64xf32>
// CHECK-NEXT:    tx.cross_entropy %[[LG]],
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = true>}

func.func private @layer(%x: tensor<4x16x32xf32>, %g: tensor<32xf32>, %w1: tensor<32x64xf32>, %w2: tensor<64x32xf32>) -> tensor<4x16x32xf32> attributes {megac.role = #megac.role<layer>} {
  %n = tx.rms_norm %x, %g eps 1.0e-5 : tensor<4x16x32xf32>, tensor<32xf32>
  %h = tx.matmul %n, %w1 : tensor<4x16x32xf32>, tensor<32x64xf32> -> tensor<4x16x64xf32>
  %a = tx.gelu %h (tanh) : tensor<4x16x64xf32>
  %o = tx.matmul %a, %w2 : tensor<4x16x64xf32>, tensor<64x32xf32> -> tensor<4x16x32xf32>
  %y = tx.add %x, %o : tensor<4x16x32xf32>, tensor<4x16x32xf32>
  return %y : tensor<4x16x32xf32>
}

func.func @forward(%ids: tensor<4x16xi32>, %labels: tensor<4x16xi32>) -> tensor<f32> attributes {megac.role = #megac.role<model>} {
  %wte = tx.param "wte" role vocab_embedding parallel_dim 0 init(normal) : tensor<64x32xf32>
  %g = tx.param "ln_f" role norm init(ones) : tensor<32xf32>
  %w1 = tx.param "w1" role column_parallel_weight parallel_dim 1 init(normal) : tensor<32x64xf32>
  %w2 = tx.param "w2" role row_parallel_weight parallel_dim 0 init(normal) : tensor<64x32xf32>
  %e = tx.embedding %wte[%ids] : tensor<64x32xf32>, tensor<4x16xi32> -> tensor<4x16x32xf32>
  %y = call @layer(%e, %g, %w1, %w2) : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<4x16x32xf32>
  %n = tx.rms_norm %y, %g eps 1.0e-5 : tensor<4x16x32xf32>, tensor<32xf32>
  %logits = tx.matmul %n, %wte transpose_rhs : tensor<4x16x32xf32>, tensor<64x32xf32> -> tensor<4x16x64xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<4x16x64xf32>, tensor<4x16xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
