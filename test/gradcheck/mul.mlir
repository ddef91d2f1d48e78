// RUN: megac-gradcheck %s | FileCheck %s
// tx.mul with equal shapes and with a broadcast rhs; x is used twice (x * x), so its
// cotangents add up.

// CHECK: x [2x3x5] {{.*}} PASS
// CHECK: y [2x3x5] {{.*}} PASS
// CHECK: scale [5] {{.*}} PASS
// CHECK: gradcheck: 3 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x5xf32>
  %y = tx.param "y" init(normal) : tensor<2x3x5xf32>
  %scale = tx.param "scale" init(ones) : tensor<5xf32>
  %a = tx.mul %x, %y : tensor<2x3x5xf32>, tensor<2x3x5xf32>
  %b = tx.mul %a, %scale : tensor<2x3x5xf32>, tensor<5xf32>
  %c = tx.mul %b, %x : tensor<2x3x5xf32>, tensor<2x3x5xf32>
  %loss = tx.cross_entropy %c, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
