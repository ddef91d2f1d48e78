// RUN: megac-gradcheck %s | FileCheck %s
// A router's z-loss (tx.router_z_loss: the mean over the tokens of logsumexp(logits)^2) returned
// alone: tx.router_z_loss_grad against central differences.

// CHECK: x [6x4] {{.*}} PASS
// CHECK: gate.weight [5x4] {{.*}} PASS
// CHECK: gradcheck: 2 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<6x4xf32>
  %gate = tx.param "gate.weight" init(normal) : tensor<5x4xf32>
  %logits = tx.matmul %x, %gate transpose_rhs : tensor<6x4xf32>, tensor<5x4xf32> -> tensor<6x5xf32>
  %z = tx.router_z_loss %logits : tensor<6x5xf32> -> tensor<f32>
  return %z : tensor<f32>
}
