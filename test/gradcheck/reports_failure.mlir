// RUN: not megac-gradcheck --tolerance=1e-15 %s | FileCheck %s
// The checker's failure path: no finite difference is exact to 1e-15, so every parameter
// fails, each on its own line, and the exit code is 1.

// CHECK: logits [2x3x5] {{.*}} FAIL
// CHECK: head [5x5] {{.*}} FAIL
// CHECK: gradcheck: 2 params, 2 failed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %logits = tx.param "logits" init(normal) : tensor<2x3x5xf32>
  %head = tx.param "head" init(normal) : tensor<5x5xf32>
  %y = tx.matmul %logits, %head : tensor<2x3x5xf32>, tensor<5x5xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
