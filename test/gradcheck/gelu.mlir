// RUN: megac-gradcheck %s | FileCheck %s
// tx.gelu, both the tanh approximation and the exact erf form.

// CHECK: x [2x3x5] {{.*}} PASS
// CHECK: y [2x3x5] {{.*}} PASS
// CHECK: gradcheck: 2 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x5xf32>
  %y = tx.param "y" init(normal) : tensor<2x3x5xf32>
  %a = tx.gelu %x (tanh) : tensor<2x3x5xf32>
  %b = tx.gelu %y (erf) : tensor<2x3x5xf32>
  %c = tx.add %a, %b : tensor<2x3x5xf32>, tensor<2x3x5xf32>
  %loss = tx.cross_entropy %c, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
