// RUN: megac-gradcheck %s | FileCheck %s
// tx.dropout: the checker draws no masks, so only rate 0 (the identity) is checked here; the
// VJP's same-rate, same-stream rule is covered by test/Transforms/autodiff.mlir.

// CHECK: x [2x3x5] {{.*}} PASS
// CHECK: gradcheck: 1 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x5xf32>
  %y = tx.dropout %x rate 0.0 stream 1 : tensor<2x3x5xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
