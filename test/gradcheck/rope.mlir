// RUN: megac-gradcheck %s | FileCheck %s
// tx.rope and its inverse (each the other's VJP); head_dim 8 gives four frequencies; q's
// positions divided by 2.5 (linear rope scaling: the VJP rotates back as the forward scaled).

// CHECK: q [2x3x2x8] {{.*}} PASS
// CHECK: k [2x3x2x8] {{.*}} PASS
// CHECK: head [16x5] {{.*}} PASS
// CHECK: gradcheck: 3 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %q = tx.param "q" init(normal) : tensor<2x3x2x8xf32>
  %k = tx.param "k" init(normal) : tensor<2x3x2x8xf32>
  %qr = tx.rope %q theta 10.0 positions_divided_by 2.5 : tensor<2x3x2x8xf32>
  %kr = tx.rope %k theta 10000.0 inverse : tensor<2x3x2x8xf32>
  %qf = tx.reshape %qr : tensor<2x3x2x8xf32> -> tensor<2x3x16xf32>
  %kf = tx.reshape %kr : tensor<2x3x2x8xf32> -> tensor<2x3x16xf32>
  %both = tx.mul %qf, %kf : tensor<2x3x16xf32>, tensor<2x3x16xf32>
  %head = tx.param "head" init(normal) : tensor<16x5xf32>
  %logits = tx.matmul %both, %head : tensor<2x3x16xf32>, tensor<16x5xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
