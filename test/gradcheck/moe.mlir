// RUN: megac-gradcheck %s | FileCheck %s
// A mixture of experts as Mixtral's layer builds it (tx.moe_route, tx.moe_assign, tx.moe_scatter,
// tx.grouped_matmul, tx.moe_gather), then a second router without renormalisation (pre_softmax,
// Qwen2-MoE's) whose weights scale the rows: every gradient op of the mixture (moe_route_grad both
// ways, moe_row_dot, grouped_matmul_weight_grad both layouts) against finite differences.

// CHECK: x [6x4] {{.*}} PASS
// CHECK: gate.weight [4x4] {{.*}} PASS
// CHECK: experts.*.w1.weight [4x5x4] {{.*}} PASS
// CHECK: experts.*.w2.weight [4x5x4] {{.*}} PASS
// CHECK: gate2.weight [4x3] {{.*}} PASS
// CHECK: head [4x5] {{.*}} PASS
// CHECK: gradcheck: 6 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<6x4xf32>
  %gate = tx.param "gate.weight" init(normal) : tensor<4x4xf32>
  %logits = tx.matmul %x, %gate transpose_rhs : tensor<6x4xf32>, tensor<4x4xf32> -> tensor<6x4xf32>
  %probs, %experts, %weights = tx.moe_route %logits topk 2 : tensor<6x4xf32> -> tensor<6x2xi32>, tensor<6x2xf32>
  %rows, %counts = tx.moe_assign %experts : tensor<6x2xi32> -> tensor<4xi32>
  %xe = tx.moe_scatter %x, %rows : tensor<6x4xf32>, tensor<6x2xi32> -> tensor<12x4xf32>
  %w1 = tx.param "experts.*.w1.weight" init(normal) : tensor<4x5x4xf32>
  %h = tx.grouped_matmul %xe, %w1, %counts transpose_rhs : tensor<12x4xf32>, tensor<4x5x4xf32>, tensor<4xi32> -> tensor<12x5xf32>
  %w2 = tx.param "experts.*.w2.weight" init(normal) : tensor<4x5x4xf32>
  %ye = tx.grouped_matmul %h, %w2, %counts : tensor<12x5xf32>, tensor<4x5x4xf32>, tensor<4xi32> -> tensor<12x4xf32>
  %y = tx.moe_gather %ye, %rows weights %weights : tensor<6x2xf32> : tensor<12x4xf32>, tensor<6x2xi32> -> tensor<6x4xf32>
  %gate2 = tx.param "gate2.weight" init(normal) : tensor<4x3xf32>
  %logits2 = tx.matmul %y, %gate2 : tensor<6x4xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  %probs2, %experts2, %weights2 = tx.moe_route %logits2 topk 2 pre_softmax : tensor<6x3xf32> -> tensor<6x2xi32>, tensor<6x2xf32>
  %rows2, %counts2 = tx.moe_assign %experts2 : tensor<6x2xi32> -> tensor<3xi32>
  %ye2 = tx.moe_scatter %y, %rows2 weights %weights2 : tensor<6x2xf32> : tensor<6x4xf32>, tensor<6x2xi32> -> tensor<12x4xf32>
  %y2 = tx.moe_gather %ye2, %rows2 : tensor<12x4xf32>, tensor<6x2xi32> -> tensor<6x4xf32>
  %z = tx.reshape %y2 : tensor<6x4xf32> -> tensor<2x3x4xf32>
  %head = tx.param "head" init(normal) : tensor<4x5xf32>
  %out = tx.matmul %z, %head : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %out, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
