// RUN: megac-opt %s --megac-expert-parallel -split-input-file -verify-diagnostics | FileCheck %s
// megac-expert-parallel on a small hand-written mixture of experts (the frontend's forward, before
// megac-autodiff), expert_model_parallel_size 2: each rank holds 2 of the 4 experts (ep rank 0's
// block of the stacked weight), the layer function takes the block, and between the scatter and
// the gather the rows are exchanged: 6 tokens (both dp ranks' 3) x top 2 = 12 rows in expert order
// here, at most 3 x min(2, 2 local experts) = 6 from each of the 2 ranks there (12: one rank's, as
// megac-shard-localize will leave them), the grouped GEMMs and the row-wise op between them on
// those, then the results sent back for the gather.

shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 2, tp = 1, expert_model_parallel_size = 2>}
// CHECK-LABEL: func.func private @experts
// CHECK-SAME:    (%{{.*}}: tensor<6x4xf32>, %{{.*}}: tensor<6x4xf32>, %[[W1:.*]]: tensor<2x5x4xf32>, %[[W2:.*]]: tensor<2x4x5xf32>) -> tensor<6x4xf32>
// CHECK:         %[[ROWS:.*]], %[[COUNTS:.*]] = tx.moe_assign
// CHECK-NEXT:    %[[XE:.*]] = tx.moe_scatter
// CHECK-NEXT:    %[[GOT:.*]] = tx.moe_exchange_counts %[[COUNTS]] over 2 ranks : tensor<4xi32>
// CHECK-NEXT:    %[[SENT:.*]] = tx.moe_dispatch %[[XE]], %[[COUNTS]], %[[GOT]] over 2 ranks : tensor<12x4xf32>, tensor<4xi32> -> tensor<12x4xf32>
// CHECK-NEXT:    %[[H:.*]] = tx.grouped_matmul %[[SENT]], %[[W1]], %[[GOT]] transpose_rhs : tensor<12x4xf32>, tensor<2x5x4xf32>, tensor<4xi32> -> tensor<12x5xf32>
// CHECK-NEXT:    %[[A:.*]] = tx.gelu %[[H]] {{.*}}: tensor<12x5xf32>
// CHECK-NEXT:    %[[Y:.*]] = tx.grouped_matmul %[[A]], %[[W2]], %[[GOT]] transpose_rhs : tensor<12x5xf32>, tensor<2x4x5xf32>, tensor<4xi32> -> tensor<12x4xf32>
// CHECK-NEXT:    %[[BACK:.*]] = tx.moe_combine %[[Y]], %[[COUNTS]], %[[GOT]] over 2 ranks : tensor<12x4xf32>, tensor<4xi32> -> tensor<12x4xf32>
// CHECK-NEXT:    tx.moe_gather %[[BACK]], %[[ROWS]] weights
func.func private @experts(%x: tensor<6x4xf32>, %logits: tensor<6x4xf32>, %w1: tensor<4x5x4xf32>, %w2: tensor<4x4x5xf32>) -> tensor<6x4xf32> {
  %probs, %experts, %weights = tx.moe_route %logits topk 2 : tensor<6x4xf32> -> tensor<6x2xi32>, tensor<6x2xf32>
  %rows, %counts = tx.moe_assign %experts : tensor<6x2xi32> -> tensor<4xi32>
  %xe = tx.moe_scatter %x, %rows : tensor<6x4xf32>, tensor<6x2xi32> -> tensor<12x4xf32>
  %h = tx.grouped_matmul %xe, %w1, %counts transpose_rhs : tensor<12x4xf32>, tensor<4x5x4xf32>, tensor<4xi32> -> tensor<12x5xf32>
  %a = tx.gelu %h (tanh) : tensor<12x5xf32>
  %y = tx.grouped_matmul %a, %w2, %counts transpose_rhs : tensor<12x5xf32>, tensor<4x4x5xf32>, tensor<4xi32> -> tensor<12x4xf32>
  %out = tx.moe_gather %y, %rows weights %weights : tensor<6x2xf32> : tensor<12x4xf32>, tensor<6x2xi32> -> tensor<6x4xf32>
  return %out : tensor<6x4xf32>
}
// CHECK-LABEL: func.func @forward
// CHECK:         tx.param "experts.*.w1.weight" at [0, 0, 0] of [4, 5, 4] role expert_weight {{.*}} : tensor<2x5x4xf32>
// CHECK:         tx.param "experts.*.w2.weight" at [0, 0, 0] of [4, 4, 5] role expert_weight {{.*}} : tensor<2x4x5xf32>
// CHECK:         call @experts({{.*}}) : (tensor<6x4xf32>, tensor<6x4xf32>, tensor<2x5x4xf32>, tensor<2x4x5xf32>) -> tensor<6x4xf32>
func.func @forward(%x: tensor<6x4xf32>, %logits: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %w1 = tx.param "experts.*.w1.weight" role expert_weight init(normal, std = 2.000000e-02) : tensor<4x5x4xf32>
  %w2 = tx.param "experts.*.w2.weight" role expert_weight init(normal, std = 2.000000e-02) : tensor<4x4x5xf32>
  %y = call @experts(%x, %logits, %w1, %w2) : (tensor<6x4xf32>, tensor<6x4xf32>, tensor<4x5x4xf32>, tensor<4x4x5xf32>) -> tensor<6x4xf32>
  return %y : tensor<6x4xf32>
}

// -----

// Only row-wise ops may run on the received rows: a reshape between the experts' GEMMs is refused.
shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 2, tp = 1, expert_model_parallel_size = 2>}
func.func @forward(%x: tensor<6x4xf32>, %l: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %w1 = tx.param "experts.*.w1.weight" role expert_weight init(normal, std = 2.000000e-02) : tensor<4x4x4xf32>
  %probs, %experts, %weights = tx.moe_route %l topk 2 : tensor<6x4xf32> -> tensor<6x2xi32>, tensor<6x2xf32>
  %rows, %counts = tx.moe_assign %experts : tensor<6x2xi32> -> tensor<4xi32>
  %xe = tx.moe_scatter %x, %rows : tensor<6x4xf32>, tensor<6x2xi32> -> tensor<12x4xf32>
  %h = tx.grouped_matmul %xe, %w1, %counts transpose_rhs : tensor<12x4xf32>, tensor<4x4x4xf32>, tensor<4xi32> -> tensor<12x4xf32>
  // expected-error @+1 {{megac-expert-parallel: between the experts' dispatch and combine only row-wise ops}}
  %r = tx.reshape %h : tensor<12x4xf32> -> tensor<6x8xf32>
  %back = tx.reshape %r : tensor<6x8xf32> -> tensor<12x4xf32>
  %out = tx.moe_gather %back, %rows weights %weights : tensor<6x2xf32> : tensor<12x4xf32>, tensor<6x2xi32> -> tensor<6x4xf32>
  return %out : tensor<6x4xf32>
}
