// RUN: megac-opt %s --megac-shard-propagate | FileCheck %s
// RUN: megac-opt %s --megac-autodiff --megac-shard-propagate | FileCheck %s --check-prefix=GRAD
// tp 2 with sequence parallelism and ZeRO-3 over dp 2, on the global batch (2 per dp rank):
// values and parameters sharded on two axes at once. Only megac.sharding is added.

// The backward: the row-parallel weight's gradient split on its input features over tp and a
// partial sum over dp (the batch), the column-parallel one's on its output features; the
// column-parallel product's input gradient a partial sum over tp (Megatron's "f" backward); the
// table's gradient split on the vocabulary over tp, partial over dp.
// GRAD-LABEL: func.func private @layer_backward(
// GRAD:         = tx.matmul {{.*}} transpose_lhs {megac.sharding = #tx.sharding<[{"tp"}, {}], partial={"dp"}>}
// GRAD:         = tx.matmul {{.*}} transpose_rhs {megac.sharding = #tx.sharding<[{"dp"}, {}, {}], partial={"tp"}>}
// GRAD:         = tx.matmul {{.*}} transpose_lhs {megac.sharding = #tx.sharding<[{}, {"tp"}], partial={"dp"}>}
// GRAD:         tx.rms_norm_grad {{.*}} {megac.sharding = [#tx.sharding<[{"dp"}, {"tp"}, {}]>, #tx.sharding<[{}], partial={"dp", "tp"}>]}
// GRAD-LABEL: func.func @train_step(
// GRAD:         tx.embedding_grad {{.*}} {megac.sharding = #tx.sharding<[{"tp"}, {}], partial={"dp"}>}

shard.grid @grid(shape = 1x2x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 2, tp = 2, sequence_parallel = true, data_parallel_sharding_strategy = "optim_grads_params">}

// A layer: the residual stream split on the batch over dp and on the sequence over tp; the
// weights as the layer reads them (gathered over dp), the column-parallel one split on its
// output features over tp, which wins tp from the sequence at its GEMM (the partition's
// all-gather of the norm's output); the row-parallel product is a partial sum over tp until the
// residual add (the partition's reduce-scatter).
// CHECK-LABEL: func.func private @layer(
// CHECK-SAME:    %{{.*}}: tensor<4x16x32xf32> {megac.sharding = #tx.sharding<[{"dp"}, {"tp"}, {}]>},
// CHECK-SAME:    %{{.*}}: tensor<32xf32> {megac.sharding = #tx.sharding<[{}]>},
// CHECK-SAME:    %{{.*}}: tensor<32x64xf32> {megac.sharding = #tx.sharding<[{}, {"tp"}]>},
// CHECK-SAME:    %{{.*}}: tensor<64x32xf32> {megac.sharding = #tx.sharding<[{"tp"}, {}]>})
// CHECK-SAME:    -> (tensor<4x16x32xf32> {megac.sharding = #tx.sharding<[{"dp"}, {"tp"}, {}]>})
// CHECK:         tx.rms_norm {{.*}} {megac.sharding = #tx.sharding<[{"dp"}, {"tp"}, {}]>}
// CHECK-NEXT:    tx.matmul {{.*}} {megac.sharding = #tx.sharding<[{"dp"}, {}, {"tp"}]>}
// CHECK-NEXT:    tx.gelu {{.*}} {megac.sharding = #tx.sharding<[{"dp"}, {}, {"tp"}]>}
// CHECK-NEXT:    tx.matmul {{.*}} {megac.sharding = #tx.sharding<[{"dp"}, {}, {}], partial={"tp"}>}
// CHECK-NEXT:    tx.add {{.*}} {megac.sharding = #tx.sharding<[{"dp"}, {"tp"}, {}]>}
func.func private @layer(%x: tensor<4x16x32xf32>, %g: tensor<32xf32>, %w1: tensor<32x64xf32>, %w2: tensor<64x32xf32>) -> tensor<4x16x32xf32> attributes {megac.role = #megac.role<layer>} {
  %n = tx.rms_norm %x, %g eps 1.0e-5 : tensor<4x16x32xf32>, tensor<32xf32>
  %h = tx.matmul %n, %w1 : tensor<4x16x32xf32>, tensor<32x64xf32> -> tensor<4x16x64xf32>
  %a = tx.gelu %h (tanh) : tensor<4x16x64xf32>
  %o = tx.matmul %a, %w2 : tensor<4x16x64xf32>, tensor<64x32xf32> -> tensor<4x16x32xf32>
  %y = tx.add %x, %o : tensor<4x16x32xf32>, tensor<4x16x32xf32>
  return %y : tensor<4x16x32xf32>
}

// The model: ids and labels split on the batch; parameters as ops read them (megac.sharding:
// tp's split) and as ZeRO-3 keeps them (megac.kept: also split over dp); the vocabulary-parallel
// embedding's table on tp; the tied head's logits split on the vocabulary; the loss
// a partial sum over the batch (dp), the vocabulary whole inside cross-entropy.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME:    %{{.*}}: tensor<4x16xi32> {megac.sharding = #tx.sharding<[{"dp"}, {}]>}
// CHECK:         tx.param "wte" {{.*}} {megac.kept = #tx.sharding<[{"tp", "dp"}, {}]>, megac.sharding = #tx.sharding<[{"tp"}, {}]>}
// CHECK:         tx.param "ln_f" {{.*}} {megac.kept = #tx.sharding<[{"dp"}]>, megac.sharding = #tx.sharding<[{}]>}
// CHECK:         tx.param "w1" {{.*}} {megac.kept = #tx.sharding<[{"dp"}, {"tp"}]>, megac.sharding = #tx.sharding<[{}, {"tp"}]>}
// CHECK:         tx.param "w2" {{.*}} {megac.kept = #tx.sharding<[{"tp", "dp"}, {}]>, megac.sharding = #tx.sharding<[{"tp"}, {}]>}
// CHECK:         tx.embedding {{.*}} {megac.sharding = #tx.sharding<[{"dp"}, {}, {}], partial={"tp"}>}
// CHECK:         call @layer({{.*}} {megac.sharding = #tx.sharding<[{"dp"}, {"tp"}, {}]>}
// CHECK:         tx.matmul {{.*}} transpose_rhs {megac.sharding = #tx.sharding<[{"dp"}, {}, {"tp"}]>}
// CHECK:         tx.cross_entropy {{.*}} {megac.sharding = #tx.sharding<[], partial={"dp"}>}
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
