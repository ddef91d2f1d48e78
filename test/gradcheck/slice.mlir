// RUN: megac-gradcheck %s | FileCheck %s
// tx.slice along the last dimension (a fused QKV split) and along the sequence; the
// backward pads the cotangent back into place (entries outside the slice get zero).

// CHECK: qkv [2x3x12] {{.*}} PASS
// CHECK: long [2x5x5] {{.*}} PASS
// CHECK: head [4x5] {{.*}} PASS
// CHECK: gradcheck: 3 params, all passed
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %qkv = tx.param "qkv" init(normal) : tensor<2x3x12xf32>
  %k = tx.slice %qkv dim 2 offset 4 : tensor<2x3x12xf32> -> tensor<2x3x4xf32>
  %long = tx.param "long" init(normal) : tensor<2x5x5xf32>
  %mid = tx.slice %long dim 1 offset 1 : tensor<2x5x5xf32> -> tensor<2x3x5xf32>
  %head = tx.param "head" init(normal) : tensor<4x5xf32>
  %logits = tx.matmul %k, %head : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %sum = tx.add %logits, %mid : tensor<2x3x5xf32>, tensor<2x3x5xf32>
  %loss = tx.cross_entropy %sum, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
