// RUN: megac-gradcheck %s | FileCheck %s
// tx.reshape: heads merged back into the hidden dimension, as after attention.

// CHECK: x [2x3x2x2] {{.*}} PASS
// CHECK: head [4x5] {{.*}} PASS
// CHECK: gradcheck: 2 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x2x2xf32>
  %y = tx.reshape %x : tensor<2x3x2x2xf32> -> tensor<2x3x4xf32>
  %head = tx.param "head" init(normal) : tensor<4x5xf32>
  %logits = tx.matmul %y, %head : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
