// RUN: megac-opt %s -split-input-file | megac-opt -split-input-file | FileCheck %s
// Each op prints in the form it parses from, and survives a second round trip.

// CHECK-LABEL: func @param
func.func @param() -> (tensor<257x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  // CHECK: tx.param "transformer.wte.weight" init(normal, std = 2.000000e-02) : tensor<257x64xf32>
  %0 = tx.param "transformer.wte.weight" init(normal, std = 2.0e-02) : tensor<257x64xf32>
  // CHECK: tx.param "transformer.h.0.attn.c_attn.weight" at [0, 64] of [64, 192] init(normal) : tensor<64x64xf32>
  %1 = tx.param "transformer.h.0.attn.c_attn.weight" at [0, 64] of [64, 192] init(normal) : tensor<64x64xf32>
  // CHECK: tx.param "wte" at [0, 0] of [257, 64] padded role vocab_embedding parallel_dim 0 init(normal) : tensor<192x64xf32>
  %4 = tx.param "wte" at [0, 0] of [257, 64] padded role vocab_embedding parallel_dim 0 init(normal) : tensor<192x64xf32>
  // CHECK: tx.param "ln.weight" init(ones) : tensor<64xf32>
  %2 = tx.param "ln.weight" init(ones) : tensor<64xf32>
  // CHECK: tx.param "ln.bias" init(zeros) : tensor<64xf32>
  %3 = tx.param "ln.bias" init(zeros) : tensor<64xf32>
  return %0, %1, %2, %3 : tensor<257x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// CHECK-LABEL: func @embedding
func.func @embedding(%table: tensor<257x64xf32>, %ids: tensor<2x8xi32>) -> tensor<2x8x64xf32> {
  // CHECK: tx.embedding %{{.*}}[%{{.*}}] : tensor<257x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xf32>
  %0 = tx.embedding %table[%ids] : tensor<257x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xf32>
  return %0 : tensor<2x8x64xf32>
}

// -----

// CHECK-LABEL: func @matmul
func.func @matmul(%x: tensor<2x8x64xf32>, %w: tensor<64x256xf32>, %wt: tensor<256x64xf32>,
                  %a: tensor<2x4x8x16xf32>, %b: tensor<2x4x8x16xf32>)
    -> (tensor<2x8x256xf32>, tensor<2x8x256xf32>, tensor<2x4x8x8xf32>, tensor<2x4x16x16xf32>) {
  // CHECK: tx.matmul %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<64x256xf32> -> tensor<2x8x256xf32>
  %0 = tx.matmul %x, %w : tensor<2x8x64xf32>, tensor<64x256xf32> -> tensor<2x8x256xf32>
  // CHECK: tx.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x8x64xf32>, tensor<256x64xf32> -> tensor<2x8x256xf32>
  %1 = tx.matmul %x, %wt transpose_rhs : tensor<2x8x64xf32>, tensor<256x64xf32> -> tensor<2x8x256xf32>
  // CHECK: tx.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x8xf32>
  %2 = tx.matmul %a, %b transpose_rhs : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x8xf32>
  // CHECK: tx.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x16x16xf32>
  %3 = tx.matmul %a, %b transpose_lhs : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x16x16xf32>
  return %0, %1, %2, %3 : tensor<2x8x256xf32>, tensor<2x8x256xf32>, tensor<2x4x8x8xf32>, tensor<2x4x16x16xf32>
}

// -----

// CHECK-LABEL: func @add_mul
func.func @add_mul(%x: tensor<2x8x64xf32>, %bias: tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  // CHECK: tx.add %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<64xf32>
  %0 = tx.add %x, %bias : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: tx.mul %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<2x8x64xf32>
  %1 = tx.mul %0, %x : tensor<2x8x64xf32>, tensor<2x8x64xf32>
  return %0, %1 : tensor<2x8x64xf32>, tensor<2x8x64xf32>
}

// -----

// CHECK-LABEL: func @reshape_slice
func.func @reshape_slice(%x: tensor<2x8x192xf32>) -> tensor<2x8x4x16xf32> {
  // CHECK: tx.slice %{{.*}} dim 2 offset 64 : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
  %k = tx.slice %x dim 2 offset 64 : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
  // CHECK: tx.reshape %{{.*}} : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %0 = tx.reshape %k : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// CHECK-LABEL: func @norms
func.func @norms(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  // CHECK: tx.layer_norm %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  %0 = tx.layer_norm %x, %w, %b eps 1.0e-5 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  // CHECK: tx.rms_norm %{{.*}}, %{{.*}} eps 9.9999999999999995E-7 : tensor<2x8x64xf32>, tensor<64xf32>
  %1 = tx.rms_norm %x, %w eps 1.0e-6 : tensor<2x8x64xf32>, tensor<64xf32>
  return %0, %1 : tensor<2x8x64xf32>, tensor<2x8x64xf32>
}

// -----

// CHECK-LABEL: func @activations
func.func @activations(%x: tensor<2x8x256xf32>, %u: tensor<2x8x256xf32>) -> (tensor<2x8x256xf32>, tensor<2x8x256xf32>, tensor<2x8x256xf32>) {
  // CHECK: tx.gelu %{{.*}} (tanh) : tensor<2x8x256xf32>
  %0 = tx.gelu %x (tanh) : tensor<2x8x256xf32>
  // CHECK: tx.gelu %{{.*}} (erf) : tensor<2x8x256xf32>
  %1 = tx.gelu %x (erf) : tensor<2x8x256xf32>
  // CHECK: tx.swiglu %{{.*}}, %{{.*}} : tensor<2x8x256xf32>, tensor<2x8x256xf32>
  %2 = tx.swiglu %x, %u : tensor<2x8x256xf32>, tensor<2x8x256xf32>
  return %0, %1, %2 : tensor<2x8x256xf32>, tensor<2x8x256xf32>, tensor<2x8x256xf32>
}

// -----

// CHECK-LABEL: func @dropout
func.func @dropout(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  // CHECK: tx.dropout %{{.*}} rate 1.000000e-01 stream 7 : tensor<2x8x64xf32>
  %0 = tx.dropout %x rate 0.1 stream 7 : tensor<2x8x64xf32>
  return %0 : tensor<2x8x64xf32>
}

// -----

// CHECK-LABEL: func @rope
func.func @rope(%q: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // CHECK: tx.rope %{{.*}} theta 1.000000e+04 : tensor<2x8x4x16xf32>
  %0 = tx.rope %q theta 10000.0 : tensor<2x8x4x16xf32>
  // Linear rope scaling: positions divided by 4.
  // CHECK: tx.rope %{{.*}} theta 1.000000e+04 positions_divided_by 4.000000e+00 inverse : tensor<2x8x4x16xf32>
  %1 = tx.rope %0 theta 10000.0 positions_divided_by 4.0 inverse : tensor<2x8x4x16xf32>
  return %1 : tensor<2x8x4x16xf32>
}

// -----

// CHECK-LABEL: func @gemma_norm_and_scale
func.func @gemma_norm_and_scale(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  // CHECK: tx.rms_norm %{{.*}}, %{{.*}} eps 9.9999999999999995E-7 weight_offset 1.000000e+00 :
  %0 = tx.rms_norm %x, %w eps 1.0e-6 weight_offset 1.0 : tensor<2x8x16xf32>, tensor<16xf32>
  // CHECK: tx.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} eps 9.9999999999999995E-7 weight_offset 1.000000e+00 :
  %1:2 = tx.rms_norm_grad %0, %x, %w eps 1.0e-6 weight_offset 1.0 : tensor<2x8x16xf32>, tensor<16xf32>
  // CHECK: tx.scale %{{.*}} by 8.000000e+00 : tensor<2x8x16xf32>
  %2 = tx.scale %x by 8.0 : tensor<2x8x16xf32>
  return %0, %2 : tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// CHECK-LABEL: func @masked_lm_loss
func.func @masked_lm_loss(%l: tensor<2x8x16xf32>, %y: tensor<2x8xi32>, %d: tensor<f32>) -> tensor<f32> {
  // CHECK: tx.cross_entropy %{{.*}}, %{{.*}} ignore_index -100 :
  %0 = tx.cross_entropy %l, %y ignore_index -100 : tensor<2x8x16xf32>, tensor<2x8xi32> -> tensor<f32>
  // CHECK: tx.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} vocab_size 12 ignore_index -100 :
  %1 = tx.cross_entropy_grad %d, %l, %y vocab_size 12 ignore_index -100 : tensor<f32>, tensor<2x8x16xf32>, tensor<2x8xi32>
  return %0 : tensor<f32>
}

// -----

// CHECK-LABEL: func @attention
func.func @attention(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) {
  // CHECK: tx.attention %{{.*}}, %{{.*}}, %{{.*}} causal scale 2.500000e-01 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32> -> tensor<2x8x4x16xf32>
  %0 = tx.attention %q, %k, %v causal scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32> -> tensor<2x8x4x16xf32>
  // CHECK: tx.attention %{{.*}}, %{{.*}}, %{{.*}} scale 2.500000e-01 :
  %1 = tx.attention %q, %k, %v scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32> -> tensor<2x8x4x16xf32>
  // CHECK: tx.attention %{{.*}}, %{{.*}}, %{{.*}} causal window 3 scale 2.500000e-01 :
  %2 = tx.attention %q, %k, %v causal window 3 scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32> -> tensor<2x8x4x16xf32>
  // CHECK: tx.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal window 3 scale 2.500000e-01 :
  %3:3 = tx.attention_grad %2, %q, %k, %v causal window 3 scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
  return %0, %1 : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
}

// -----

// CHECK-LABEL: func @cross_entropy
func.func @cross_entropy(%logits: tensor<2x8x257xf32>, %labels: tensor<2x8xi64>) -> tensor<f32> {
  // CHECK: tx.cross_entropy %{{.*}}, %{{.*}} : tensor<2x8x257xf32>, tensor<2x8xi64> -> tensor<f32>
  %0 = tx.cross_entropy %logits, %labels : tensor<2x8x257xf32>, tensor<2x8xi64> -> tensor<f32>
  // CHECK: tx.cross_entropy %{{.*}}, %{{.*}} vocab_size 250 : tensor<2x8x257xf32>, tensor<2x8xi64> -> tensor<f32>
  %1 = tx.cross_entropy %logits, %labels vocab_size 250 : tensor<2x8x257xf32>, tensor<2x8xi64> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// CHECK-LABEL: func @fused_linear
func.func @fused_linear(%x: tensor<2x8x64xf32>, %w: tensor<64x256xf32>, %wt: tensor<256x64xf32>, %b: tensor<256xf32>) -> (tensor<2x8x256xf32>, tensor<2x8x256xf32>) {
  // CHECK: tx.matmul_bias %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<64x256xf32>, tensor<256xf32> -> tensor<2x8x256xf32>
  %0 = tx.matmul_bias %x, %w, %b : tensor<2x8x64xf32>, tensor<64x256xf32>, tensor<256xf32> -> tensor<2x8x256xf32>
  // CHECK: tx.matmul_bias_gelu %{{.*}}, %{{.*}}, %{{.*}} transpose_rhs (tanh) : tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<256xf32> -> tensor<2x8x256xf32>
  %1:2 = tx.matmul_bias_gelu %x, %wt, %b transpose_rhs (tanh) : tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<256xf32> -> tensor<2x8x256xf32>
  return %0, %1#1 : tensor<2x8x256xf32>, tensor<2x8x256xf32>
}

// -----

// How megac-tensor-parallel records shardings: per dimension the grid axes it is split over,
// and the axes of a partial sum.
// CHECK-LABEL: func @shardings
// CHECK-SAME: a = #tx.sharding<[{}, {"tp"}, {}]>
// CHECK-SAME: b = #tx.sharding<[{}, {}], partial={"tp"}>
// CHECK-SAME: c = #tx.sharding<[]>
// CHECK-SAME: d = #tx.sharding<[{"dp", "tp"}]>
func.func @shardings() attributes {a = #tx.sharding<[{}, {"tp"}, {}]>, b = #tx.sharding<[{}, {}], partial={"tp"}>,
                                   c = #tx.sharding<[]>, d = #tx.sharding<[{"dp", "tp"}]>} {
  return
}
