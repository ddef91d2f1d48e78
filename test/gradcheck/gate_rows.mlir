// RUN: megac-gradcheck %s | FileCheck %s
// tx.gate_rows (Qwen2-MoE's shared expert: each row times the sigmoid of its gate logit): both
// gradients of tx.gate_rows_grad against central differences.

// CHECK: x [6x4] {{.*}} PASS
// CHECK: shared_expert_gate.weight [1x4] {{.*}} PASS
// CHECK: head [4x5] {{.*}} PASS
// CHECK: gradcheck: 3 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<6x4xf32>
  %g = tx.param "shared_expert_gate.weight" init(normal) : tensor<1x4xf32>
  %logit = tx.matmul %x, %g transpose_rhs : tensor<6x4xf32>, tensor<1x4xf32> -> tensor<6x1xf32>
  %y = tx.gate_rows %x, %logit : tensor<6x4xf32>, tensor<6x1xf32>
  %z = tx.reshape %y : tensor<6x4xf32> -> tensor<2x3x4xf32>
  %head = tx.param "head" init(normal) : tensor<4x5xf32>
  %out = tx.matmul %z, %head : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %out, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
