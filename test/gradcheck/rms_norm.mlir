// RUN: megac-gradcheck %s | FileCheck %s
// tx.rms_norm: input and weight gradients from rms_norm_grad; then Gemma's (1 + w) norm of it
// (weight_offset 1, its weight drawn around 0) scaled by a constant (tx.scale).

// CHECK: x [2x3x4] {{.*}} PASS
// CHECK: norm.weight [4] {{.*}} PASS
// CHECK: gemma.weight [4] {{.*}} PASS
// CHECK: head [4x5] {{.*}} PASS
// CHECK: gradcheck: 4 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x4xf32>
  %w = tx.param "norm.weight" init(ones) : tensor<4xf32>
  %n = tx.rms_norm %x, %w eps 1.0e-6 : tensor<2x3x4xf32>, tensor<4xf32>
  %gw = tx.param "gemma.weight" init(normal) : tensor<4xf32>
  %g = tx.rms_norm %n, %gw eps 1.0e-6 weight_offset 1.0 : tensor<2x3x4xf32>, tensor<4xf32>
  %y = tx.scale %g by 2.5 : tensor<2x3x4xf32>
  %head = tx.param "head" init(normal) : tensor<4x5xf32>
  %logits = tx.matmul %y, %head : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
