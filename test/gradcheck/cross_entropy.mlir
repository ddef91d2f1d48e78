// RUN: megac-gradcheck %s | FileCheck %s
// tx.cross_entropy straight on the logits: cross_entropy_grad is (softmax - onehot) / tokens.

// CHECK: logits [2x3x5] {{.*}} PASS
// CHECK: gradcheck: 1 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %logits = tx.param "logits" init(normal) : tensor<2x3x5xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
