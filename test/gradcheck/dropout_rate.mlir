// RUN: not megac-gradcheck %s 2>&1 | FileCheck %s
// The checker draws no dropout masks: a nonzero rate is an error, not a silent identity.

// CHECK: error: 'tx.dropout' op with a nonzero rate cannot be evaluated by the reference interpreter: use rate 0.0 when checking gradients
// CHECK-NOT: gradcheck:
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x5xf32>
  %y = tx.dropout %x rate 0.1 stream 1 : tensor<2x3x5xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
