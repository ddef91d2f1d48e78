// RUN: megac-opt %s -split-input-file | megac-opt -split-input-file | FileCheck %s
// The backward ops print in the form they parse from, and survive a second round trip.

// CHECK-LABEL: func @param_grad
func.func @param_grad(%g: tensor<257x64xf32>) {
  // CHECK: %[[W:.*]] = tx.param "transformer.wte.weight" init(normal) : tensor<257x64xf32>
  %w = tx.param "transformer.wte.weight" init(normal) : tensor<257x64xf32>
  // CHECK: tx.param_grad %{{.*}} to %[[W]] : tensor<257x64xf32>
  tx.param_grad %g to %w : tensor<257x64xf32>
  return
}

// -----

// CHECK-LABEL: func @zeros
func.func @zeros() -> tensor<2x8x64xf32> {
  // CHECK: tx.zeros : tensor<2x8x64xf32>
  %0 = tx.zeros : tensor<2x8x64xf32>
  return %0 : tensor<2x8x64xf32>
}

// -----

// CHECK-LABEL: func @reduce_sum
func.func @reduce_sum(%g: tensor<2x8x64xf32>) -> (tensor<64xf32>, tensor<8x64xf32>, tensor<2x8x64xf32>) {
  // CHECK: tx.reduce_sum %{{.*}} : tensor<2x8x64xf32> -> tensor<64xf32>
  %0 = tx.reduce_sum %g : tensor<2x8x64xf32> -> tensor<64xf32>
  // CHECK: tx.reduce_sum %{{.*}} : tensor<2x8x64xf32> -> tensor<8x64xf32>
  %1 = tx.reduce_sum %g : tensor<2x8x64xf32> -> tensor<8x64xf32>
  // Summing over no dimension is allowed: the identity.
  // CHECK: tx.reduce_sum %{{.*}} : tensor<2x8x64xf32> -> tensor<2x8x64xf32>
  %2 = tx.reduce_sum %g : tensor<2x8x64xf32> -> tensor<2x8x64xf32>
  return %0, %1, %2 : tensor<64xf32>, tensor<8x64xf32>, tensor<2x8x64xf32>
}

// -----

// CHECK-LABEL: func @pad
func.func @pad(%g: tensor<2x8x64xf32>) -> (tensor<2x8x192xf32>, tensor<2x16x64xf32>) {
  // CHECK: tx.pad %{{.*}} dim 2 offset 64 : tensor<2x8x64xf32> -> tensor<2x8x192xf32>
  %0 = tx.pad %g dim 2 offset 64 : tensor<2x8x64xf32> -> tensor<2x8x192xf32>
  // CHECK: tx.pad %{{.*}} dim 1 offset 8 : tensor<2x8x64xf32> -> tensor<2x16x64xf32>
  %1 = tx.pad %g dim 1 offset 8 : tensor<2x8x64xf32> -> tensor<2x16x64xf32>
  return %0, %1 : tensor<2x8x192xf32>, tensor<2x16x64xf32>
}

// -----

// CHECK-LABEL: func @embedding_grad
func.func @embedding_grad(%g: tensor<2x8x64xf32>, %ids: tensor<2x8xi64>) -> tensor<257x64xf32> {
  // CHECK: tx.embedding_grad %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<2x8xi64> -> tensor<257x64xf32>
  %0 = tx.embedding_grad %g, %ids : tensor<2x8x64xf32>, tensor<2x8xi64> -> tensor<257x64xf32>
  return %0 : tensor<257x64xf32>
}

// -----

// CHECK-LABEL: func @layer_norm_grad
func.func @layer_norm_grad(%g: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>, %w: tensor<64xf32>)
    -> (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  // CHECK: %input_grad, %weight_grad, %bias_grad = tx.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x8x64xf32>, tensor<64xf32>
  %dx, %dw, %db = tx.layer_norm_grad %g, %x, %w eps 1.0e-5 : tensor<2x8x64xf32>, tensor<64xf32>
  return %dx, %dw, %db : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// CHECK-LABEL: func @rms_norm_grad
func.func @rms_norm_grad(%g: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>, %w: tensor<64xf32>)
    -> (tensor<2x8x64xf32>, tensor<64xf32>) {
  // CHECK: %input_grad, %weight_grad = tx.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} eps 9.9999999999999995E-7 : tensor<2x8x64xf32>, tensor<64xf32>
  %dx, %dw = tx.rms_norm_grad %g, %x, %w eps 1.0e-6 : tensor<2x8x64xf32>, tensor<64xf32>
  return %dx, %dw : tensor<2x8x64xf32>, tensor<64xf32>
}

// -----

// CHECK-LABEL: func @gelu_grad
func.func @gelu_grad(%g: tensor<2x8x256xf32>, %x: tensor<2x8x256xf32>) -> (tensor<2x8x256xf32>, tensor<2x8x256xf32>) {
  // CHECK: tx.gelu_grad %{{.*}}, %{{.*}} (tanh) : tensor<2x8x256xf32>
  %0 = tx.gelu_grad %g, %x (tanh) : tensor<2x8x256xf32>
  // CHECK: tx.gelu_grad %{{.*}}, %{{.*}} (erf) : tensor<2x8x256xf32>
  %1 = tx.gelu_grad %g, %x (erf) : tensor<2x8x256xf32>
  return %0, %1 : tensor<2x8x256xf32>, tensor<2x8x256xf32>
}

// -----

// CHECK-LABEL: func @swiglu_grad
func.func @swiglu_grad(%g: tensor<2x8x256xf32>, %gate: tensor<2x8x256xf32>, %up: tensor<2x8x256xf32>)
    -> (tensor<2x8x256xf32>, tensor<2x8x256xf32>) {
  // CHECK: %gate_grad, %up_grad = tx.swiglu_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x256xf32>
  %dg, %du = tx.swiglu_grad %g, %gate, %up : tensor<2x8x256xf32>
  return %dg, %du : tensor<2x8x256xf32>, tensor<2x8x256xf32>
}

// -----

// CHECK-LABEL: func @attention_grad
func.func @attention_grad(%g: tensor<2x8x4x16xf32>, %q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>,
                          %v: tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>) {
  // CHECK: %query_grad, %key_grad, %value_grad = tx.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale 2.500000e-01 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
  %dq, %dk, %dv = tx.attention_grad %g, %q, %k, %v causal scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
  // CHECK: tx.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale 2.500000e-01 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
  %dq2, %dk2, %dv2 = tx.attention_grad %g, %q, %k, %v scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
  return %dq, %dv2 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
}

// -----

// CHECK-LABEL: func @cross_entropy_grad
func.func @cross_entropy_grad(%dloss: tensor<f32>, %logits: tensor<2x8x257xf32>, %labels: tensor<2x8xi32>) -> tensor<2x8x257xf32> {
  // CHECK: tx.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<2x8x257xf32>, tensor<2x8xi32>
  %0 = tx.cross_entropy_grad %dloss, %logits, %labels : tensor<f32>, tensor<2x8x257xf32>, tensor<2x8xi32>
  return %0 : tensor<2x8x257xf32>
}

// -----

// 16-bit activations meet fp32 parameters (megac-autocast): a GEMM's operands and result, a
// bias gradient's sum and a norm's weight may differ in element type.
// CHECK-LABEL: func @mixed_storage
func.func @mixed_storage(%x: tensor<2x8x64xbf16>, %w: tensor<64x256xf32>, %g: tensor<2x8x64xbf16>, %ln: tensor<64xf32>) -> (tensor<2x8x256xbf16>, tensor<64xf32>, tensor<64x64xf32>, tensor<64xf32>) {
  // CHECK: tx.matmul %{{.*}}, %{{.*}} : tensor<2x8x64xbf16>, tensor<64x256xf32> -> tensor<2x8x256xbf16>
  %y = tx.matmul %x, %w : tensor<2x8x64xbf16>, tensor<64x256xf32> -> tensor<2x8x256xbf16>
  // CHECK: tx.reduce_sum %{{.*}} : tensor<2x8x64xbf16> -> tensor<64xf32>
  %db = tx.reduce_sum %g : tensor<2x8x64xbf16> -> tensor<64xf32>
  %x2 = tx.reshape %x : tensor<2x8x64xbf16> -> tensor<16x64xbf16>
  %g2 = tx.reshape %g : tensor<2x8x64xbf16> -> tensor<16x64xbf16>
  // CHECK: tx.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<16x64xbf16>, tensor<16x64xbf16> -> tensor<64x64xf32>
  %dw = tx.matmul %x2, %g2 transpose_lhs : tensor<16x64xbf16>, tensor<16x64xbf16> -> tensor<64x64xf32>
  // CHECK: tx.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x8x64xbf16>, tensor<64xf32>
  %dx, %dln, %dlnb = tx.layer_norm_grad %g, %x, %ln eps 1.0e-5 : tensor<2x8x64xbf16>, tensor<64xf32>
  return %y, %db, %dw, %dln : tensor<2x8x256xbf16>, tensor<64xf32>, tensor<64x64xf32>, tensor<64xf32>
}
