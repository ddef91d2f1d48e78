// RUN: megac-gradcheck %s | FileCheck %s
// tx.swiglu between gate/up projections and a down projection, as in a Llama MLP.

// CHECK: x [2x3x4] {{.*}} PASS
// CHECK: gate [6x4] {{.*}} PASS
// CHECK: up [6x4] {{.*}} PASS
// CHECK: down [5x6] {{.*}} PASS
// CHECK: gradcheck: 4 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x4xf32>
  %wg = tx.param "gate" init(normal) : tensor<6x4xf32>
  %wu = tx.param "up" init(normal) : tensor<6x4xf32>
  %wd = tx.param "down" init(normal) : tensor<5x6xf32>
  %g = tx.matmul %x, %wg transpose_rhs : tensor<2x3x4xf32>, tensor<6x4xf32> -> tensor<2x3x6xf32>
  %u = tx.matmul %x, %wu transpose_rhs : tensor<2x3x4xf32>, tensor<6x4xf32> -> tensor<2x3x6xf32>
  %s = tx.swiglu %g, %u : tensor<2x3x6xf32>, tensor<2x3x6xf32>
  %logits = tx.matmul %s, %wd transpose_rhs : tensor<2x3x6xf32>, tensor<5x6xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
