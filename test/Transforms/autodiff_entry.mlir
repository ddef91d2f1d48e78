// RUN: megac-opt %s --megac-autodiff=entry=loss | FileCheck %s
// The `entry` option names the function to differentiate; it still becomes @train_step.

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    tensor<2x3xi32>, %{{.*}}: tensor<2x3xi32>, %{{.*}}: tensor<f32>) -> tensor<f32>
// CHECK:         tx.cross_entropy_grad
// CHECK:         tx.param_grad
// CHECK-NOT:   func.func @loss
func.func @loss(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x4xf32>
  %loss = tx.cross_entropy %x, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
