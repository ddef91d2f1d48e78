// RUN: megac-gradcheck %s | FileCheck %s
// tx.matmul in every form autodiff handles: a shared weight (plain and transpose_rhs), a
// batched rhs (transpose_rhs and transpose_lhs), and two matrices with both flags.

// CHECK: x [2x3x4] {{.*}} PASS
// CHECK: w1 [4x6] {{.*}} PASS
// CHECK: k [2x3x4] {{.*}} PASS
// CHECK: w2 [5x6] {{.*}} PASS
// CHECK: p [4x3] {{.*}} PASS
// CHECK: q [5x4] {{.*}} PASS
// CHECK: gradcheck: 6 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x4xf32>
  %w1 = tx.param "w1" init(normal) : tensor<4x6xf32>
  %h = tx.matmul %x, %w1 : tensor<2x3x4xf32>, tensor<4x6xf32> -> tensor<2x3x6xf32>
  %k = tx.param "k" init(normal) : tensor<2x3x4xf32>
  %s = tx.matmul %x, %k transpose_rhs : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x3xf32>
  %t = tx.matmul %s, %h transpose_lhs : tensor<2x3x3xf32>, tensor<2x3x6xf32> -> tensor<2x3x6xf32>
  %w2 = tx.param "w2" init(normal) : tensor<5x6xf32>
  %u = tx.matmul %t, %w2 transpose_rhs : tensor<2x3x6xf32>, tensor<5x6xf32> -> tensor<2x3x5xf32>
  %p = tx.param "p" init(normal) : tensor<4x3xf32>
  %q = tx.param "q" init(normal) : tensor<5x4xf32>
  %m = tx.matmul %p, %q transpose_lhs transpose_rhs : tensor<4x3xf32>, tensor<5x4xf32> -> tensor<3x5xf32>
  %logits = tx.add %u, %m : tensor<2x3x5xf32>, tensor<3x5xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
