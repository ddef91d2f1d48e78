// RUN: megac-gradcheck %s | FileCheck %s
// The load-balancing loss of a router (tx.router_load, tx.load_balancing_loss): its gradient
// reaches the router through the probabilities (router_load_grad, load_balancing_loss_grad, then
// moe_route_grad), the counts holding still; the loss returned alone.

// CHECK: x [6x4] {{.*}} PASS
// CHECK: gate.weight [4x4] {{.*}} PASS
// CHECK: gradcheck: 2 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<6x4xf32>
  %gate = tx.param "gate.weight" init(normal) : tensor<4x4xf32>
  %logits = tx.matmul %x, %gate transpose_rhs : tensor<6x4xf32>, tensor<4x4xf32> -> tensor<6x4xf32>
  %probs, %experts, %weights = tx.moe_route %logits topk 2 : tensor<6x4xf32> -> tensor<6x2xi32>, tensor<6x2xf32>
  %rows, %counts = tx.moe_assign %experts : tensor<6x2xi32> -> tensor<4xi32>
  %load = tx.router_load %probs, %counts : tensor<6x4xf32>, tensor<4xi32> -> tensor<2x4xf32>
  %twice = tx.add %load, %load : tensor<2x4xf32>, tensor<2x4xf32>
  %aux = tx.load_balancing_loss %twice scale 0.25 : tensor<2x4xf32> -> tensor<f32>
  return %aux : tensor<f32>
}
