// RUN: not megac-gradcheck %s 2>&1 | FileCheck %s
// The checked function is @forward(ids, labels) -> loss.

// CHECK: error: megac-gradcheck: no function @forward
func.func @loss(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x5xf32>
  %loss = tx.cross_entropy %x, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
