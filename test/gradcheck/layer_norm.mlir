// RUN: megac-gradcheck %s | FileCheck %s
// tx.layer_norm: input, weight and bias gradients from layer_norm_grad.

// CHECK: x [2x3x4] {{.*}} PASS
// CHECK: ln.weight [4] {{.*}} PASS
// CHECK: ln.bias [4] {{.*}} PASS
// CHECK: head [4x5] {{.*}} PASS
// CHECK: gradcheck: 4 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x4xf32>
  %w = tx.param "ln.weight" init(ones) : tensor<4xf32>
  %b = tx.param "ln.bias" init(zeros) : tensor<4xf32>
  %y = tx.layer_norm %x, %w, %b eps 1.0e-5 : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>
  %head = tx.param "head" init(normal) : tensor<4x5xf32>
  %logits = tx.matmul %y, %head : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
