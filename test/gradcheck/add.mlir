// RUN: megac-gradcheck %s | FileCheck %s
// tx.add with equal shapes and with rhs broadcast over one or two leading dimensions
// (reduce_sum in the backward).

// CHECK: x [2x3x5] {{.*}} PASS
// CHECK: y [2x3x5] {{.*}} PASS
// CHECK: bias [5] {{.*}} PASS
// CHECK: pos [3x5] {{.*}} PASS
// CHECK: gradcheck: 4 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x5xf32>
  %y = tx.param "y" init(normal) : tensor<2x3x5xf32>
  %bias = tx.param "bias" init(zeros) : tensor<5xf32>
  %pos = tx.param "pos" init(normal) : tensor<3x5xf32>
  %a = tx.add %x, %y : tensor<2x3x5xf32>, tensor<2x3x5xf32>
  %b = tx.add %a, %bias : tensor<2x3x5xf32>, tensor<5xf32>
  %c = tx.add %b, %pos : tensor<2x3x5xf32>, tensor<3x5xf32>
  %loss = tx.cross_entropy %c, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
