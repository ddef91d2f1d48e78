// RUN: megac-opt %s --megac-derive-decode-step -split-input-file -verify-diagnostics | FileCheck %s
// megac-derive-decode-step on a hand-written frontend module built for one position: @forward
// becomes @decode_step returning the logits, its layer function decode_<name>.

// CHECK-LABEL: func.func private @decode_layer(
// CHECK:         tx.gelu
// CHECK-LABEL: func.func @decode_step(
// CHECK-SAME:    -> tensor<2x1x8xf32> attributes {megac.role = #megac.role<decode_step>}
// CHECK:         call @decode_layer(
// CHECK-NEXT:    %[[Y:.*]] = tx.matmul
// CHECK-NEXT:    return %[[Y]] : tensor<2x1x8xf32>
// CHECK-NOT:   @forward
func.func private @layer(%x: tensor<2x1x8xf32>) -> tensor<2x1x8xf32> attributes {megac.role = #megac.role<layer>} {
  %h = tx.gelu %x (tanh) : tensor<2x1x8xf32>
  return %h : tensor<2x1x8xf32>
}
func.func @forward(%ids: tensor<2x1xi32>, %labels: tensor<2x1xi32>) -> tensor<f32> attributes {megac.role = #megac.role<model>} {
  %w = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %w[%ids] : tensor<8x8xf32>, tensor<2x1xi32> -> tensor<2x1x8xf32>
  %h = call @layer(%e) {megac.layer_index = 0 : i64} : (tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
  %y = tx.matmul %h, %w transpose_rhs : tensor<2x1x8xf32>, tensor<8x8xf32> -> tensor<2x1x8xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x1x8xf32>, tensor<2x1xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// 16-bit logits: generation needs fp32 ones.
// expected-error @+1 {{decode_step needs the frontend's @forward ending in a cross-entropy of fp32 logits}}
module {
  func.func @forward(%ids: tensor<2x1xi32>, %labels: tensor<2x1xi32>) -> tensor<f32> attributes {megac.role = #megac.role<model>} {
    %w = tx.param "wte" init(normal) : tensor<8x8xf32>
    %e = tx.embedding %w[%ids] : tensor<8x8xf32>, tensor<2x1xi32> -> tensor<2x1x8xbf16>
    %loss = tx.cross_entropy %e, %labels : tensor<2x1x8xbf16>, tensor<2x1xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
