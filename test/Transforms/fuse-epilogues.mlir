// RUN: megac-opt %s --megac-fuse-epilogues -split-input-file | FileCheck %s
// What megac-fuse-epilogues folds, and what it must leave alone.

// CHECK-LABEL: func @linear
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  // CHECK-NEXT: %[[R:.*]] = tx.matmul_bias %arg0, %arg1, %arg2 : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  // CHECK-NEXT: return %[[R]]
  %0 = tx.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %1 = tx.add %0, %b : tensor<4x16xf32>, tensor<16xf32>
  return %1 : tensor<4x16xf32>
}

// -----

// The pre-activation stays available to its other users (the backward's gelu_grad).
// CHECK-LABEL: func @linear_gelu
func.func @linear_gelu(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  // CHECK-NEXT: %pre, %result = tx.matmul_bias_gelu %arg0, %arg1, %arg2 transpose_rhs (erf)
  // CHECK-NEXT: return %result, %pre
  %0 = tx.matmul %x, %w transpose_rhs : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %1 = tx.add %0, %b : tensor<4x16xf32>, tensor<16xf32>
  %2 = tx.gelu %1 (erf) : tensor<4x16xf32>
  return %2, %1 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Left alone: a matmul read by something besides the add (its product is needed unbiased).
// CHECK-LABEL: func @two_uses
func.func @two_uses(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  // CHECK-NOT: tx.matmul_bias
  %0 = tx.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %1 = tx.add %0, %b : tensor<4x16xf32>, tensor<16xf32>
  return %1, %0 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Left alone: a transposed lhs (a weight gradient), and an add of a full tensor (a residual).
// CHECK-LABEL: func @not_linear
func.func @not_linear(%x: tensor<8x4xf32>, %w: tensor<8x16xf32>, %r: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // CHECK-NOT: tx.matmul_bias
  %0 = tx.matmul %x, %w transpose_lhs : tensor<8x4xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %1 = tx.add %0, %r : tensor<4x16xf32>, tensor<4x16xf32>
  return %1 : tensor<4x16xf32>
}

// -----

// A fused op keeps the shardings megac-tensor-parallel recorded on the ops it replaces: the
// biased sum's, and the GELU's for the second result.
// CHECK-LABEL: func @keeps_shardings
// CHECK-NEXT: tx.matmul_bias_gelu {{.*}} {megac.sharding = [#tx.sharding<[{}, {"tp"}]>, #tx.sharding<[{}, {"tp"}]>]}
// CHECK-NEXT: tx.matmul_bias {{.*}} {megac.sharding = #tx.sharding<[{}, {}], partial={"tp"}>}
func.func @keeps_shardings(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %b1: tensor<16xf32>, %w2: tensor<16x8xf32>, %b2: tensor<8xf32>) -> (tensor<4x16xf32>, tensor<4x8xf32>) {
  %0 = tx.matmul %x, %w1 {megac.sharding = #tx.sharding<[{}, {"tp"}]>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %1 = tx.add %0, %b1 {megac.sharding = #tx.sharding<[{}, {"tp"}]>} : tensor<4x16xf32>, tensor<16xf32>
  %2 = tx.gelu %1 (tanh) {megac.sharding = #tx.sharding<[{}, {"tp"}]>} : tensor<4x16xf32>
  %3 = tx.matmul %2, %w2 {megac.sharding = #tx.sharding<[{}, {}], partial={"tp"}>} : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %4 = tx.add %3, %b2 {megac.sharding = #tx.sharding<[{}, {}], partial={"tp"}>} : tensor<4x8xf32>, tensor<8xf32>
  return %1, %4 : tensor<4x16xf32>, tensor<4x8xf32>
}
