// RUN: megac-gradcheck %s | FileCheck %s
// A table used as input embedding and LM head: its gradient is the sum of both uses. The ids
// are i64 here.

// CHECK: wte [7x4] {{.*}} PASS
// CHECK: gradcheck: 1 params, all passed
func.func @forward(%ids: tensor<2x3xi64>, %labels: tensor<2x3xi64>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<7x4xf32>
  %x = tx.embedding %wte[%ids] : tensor<7x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %logits = tx.matmul %x, %wte transpose_rhs : tensor<2x3x4xf32>, tensor<7x4xf32> -> tensor<2x3x7xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x7xf32>, tensor<2x3xi64> -> tensor<f32>
  return %loss : tensor<f32>
}
