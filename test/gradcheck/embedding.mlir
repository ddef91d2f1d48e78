// RUN: megac-gradcheck %s | FileCheck %s
// tx.embedding: the table's gradient (embedding_grad) sums cotangent rows by token id.

// CHECK: wte [7x4] {{.*}} PASS
// CHECK: head [4x5] {{.*}} PASS
// CHECK: gradcheck: 2 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<7x4xf32>
  %x = tx.embedding %wte[%ids] : tensor<7x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %head = tx.param "head" init(normal) : tensor<4x5xf32>
  %logits = tx.matmul %x, %head : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
