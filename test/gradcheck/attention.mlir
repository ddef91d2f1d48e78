// RUN: megac-gradcheck %s | FileCheck %s
// tx.attention with grouped query heads (4 query heads share 2 key/value heads), causal and
// not, and with a sliding window of one key before the query (the third position cannot see the
// first): attention_grad's key and value gradients sum over the heads of a group, and keep the window.

// CHECK: q [2x3x4x2] {{.*}} PASS
// CHECK: k [2x3x2x2] {{.*}} PASS
// CHECK: v [2x3x2x2] {{.*}} PASS
// CHECK: head [8x5] {{.*}} PASS
// CHECK: gradcheck: 4 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %q = tx.param "q" init(normal) : tensor<2x3x4x2xf32>
  %k = tx.param "k" init(normal) : tensor<2x3x2x2xf32>
  %v = tx.param "v" init(normal) : tensor<2x3x2x2xf32>
  %c = tx.attention %q, %k, %v causal scale 0.7 : tensor<2x3x4x2xf32>, tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32> -> tensor<2x3x4x2xf32>
  %f = tx.attention %q, %k, %v scale 1.3 : tensor<2x3x4x2xf32>, tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32> -> tensor<2x3x4x2xf32>
  %cf = tx.mul %c, %f : tensor<2x3x4x2xf32>, tensor<2x3x4x2xf32>
  %w = tx.attention %q, %k, %v causal window 1 scale 0.9 : tensor<2x3x4x2xf32>, tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32> -> tensor<2x3x4x2xf32>
  %cw = tx.mul %cf, %w : tensor<2x3x4x2xf32>, tensor<2x3x4x2xf32>
  %sum = tx.add %cw, %c : tensor<2x3x4x2xf32>, tensor<2x3x4x2xf32>
  %a = tx.reshape %sum : tensor<2x3x4x2xf32> -> tensor<2x3x8xf32>
  %head = tx.param "head" init(normal) : tensor<8x5xf32>
  %logits = tx.matmul %a, %head : tensor<2x3x8xf32>, tensor<8x5xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
