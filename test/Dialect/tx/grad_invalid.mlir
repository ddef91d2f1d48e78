// RUN: megac-opt %s -split-input-file -verify-diagnostics
// One rejected backward op per case, one case per check in dialects/tx/TxGradOps.cpp. Autodiff
// builds these ops, so each message should point at the VJP rule that built a bad one.

func.func @param_grad_not_param(%w: tensor<4x8xf32>, %g: tensor<4x8xf32>) {
  // expected-error @+1 {{param must be the value of a tx.param}}
  tx.param_grad %g to %w : tensor<4x8xf32>
  return
}

// -----

func.func @param_grad_type(%g: tensor<8x4xf32>) {
  %w = tx.param "w" init(normal) : tensor<4x8xf32>
  // expected-error @+1 {{failed to verify that all of {param, grad} have same type}}
  "tx.param_grad"(%w, %g) : (tensor<4x8xf32>, tensor<8x4xf32>) -> ()
  return
}

// -----

func.func @reduce_sum_not_trailing(%g: tensor<2x8x64xf32>) {
  // expected-error @+1 {{result has shape [8] but expected a trailing part of the input's shape [2, 8, 64]}}
  %0 = tx.reduce_sum %g : tensor<2x8x64xf32> -> tensor<8xf32>
  return
}

// -----

func.func @reduce_sum_bigger(%g: tensor<8x64xf32>) {
  // expected-error @+1 {{result has shape [2, 8, 64] but expected a trailing part of the input's shape [8, 64]}}
  %0 = tx.reduce_sum %g : tensor<8x64xf32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @pad_bad_dim(%g: tensor<2x8x64xf32>) {
  // expected-error @+1 {{dim 3 is outside the result [2, 8, 192]}}
  %0 = tx.pad %g dim 3 offset 0 : tensor<2x8x64xf32> -> tensor<2x8x192xf32>
  return
}

// -----

func.func @pad_other_dim(%g: tensor<2x4x64xf32>) {
  // expected-error @+1 {{input has shape [2, 4, 64] but expected [2, 8, 64] (the result's shape except along the padded dimension)}}
  %0 = tx.pad %g dim 2 offset 0 : tensor<2x4x64xf32> -> tensor<2x8x192xf32>
  return
}

// -----

func.func @pad_rank(%g: tensor<8x64xf32>) {
  // expected-error @+1 {{input has shape [8, 64] but expected [2, 8, -1] (the result's shape except along the padded dimension)}}
  %0 = tx.pad %g dim 2 offset 0 : tensor<8x64xf32> -> tensor<2x8x192xf32>
  return
}

// -----

func.func @pad_outside(%g: tensor<2x8x64xf32>) {
  // expected-error @+1 {{input placed at [160, 224) of dimension 2 does not fit in [2, 8, 192]}}
  %0 = tx.pad %g dim 2 offset 160 : tensor<2x8x64xf32> -> tensor<2x8x192xf32>
  return
}

// -----

func.func @pad_negative_offset(%g: tensor<2x8x64xf32>) {
  // expected-error @+1 {{input placed at [-1, 63) of dimension 2 does not fit in [2, 8, 192]}}
  %0 = tx.pad %g dim 2 offset -1 : tensor<2x8x64xf32> -> tensor<2x8x192xf32>
  return
}

// -----

func.func @embedding_grad_rank(%g: tensor<2x8x64xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{result must have rank 2 [vocab, hidden], found [4, 257, 64]}}
  %0 = tx.embedding_grad %g, %ids : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<4x257x64xf32>
  return
}

// -----

func.func @embedding_grad_shape(%g: tensor<2x8x32xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{grad has shape [2, 8, 32] but expected [2, 8, 64] (the ids' shape followed by the table's hidden size)}}
  %0 = tx.embedding_grad %g, %ids : tensor<2x8x32xf32>, tensor<2x8xi32> -> tensor<257x64xf32>
  return
}

// -----

func.func @layer_norm_grad_scalar(%g: tensor<f32>, %x: tensor<f32>, %w: tensor<1xf32>) {
  // expected-error @+1 {{input must have rank >= 1}}
  %0:3 = tx.layer_norm_grad %g, %x, %w eps 1.0e-5 : tensor<f32>, tensor<1xf32>
  return
}

// -----

func.func @layer_norm_grad_weight(%g: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{weight has shape [32] but expected [64] (the input's last dimension)}}
  %0:3 = tx.layer_norm_grad %g, %x, %w eps 1.0e-5 : tensor<2x8x64xf32>, tensor<32xf32>
  return
}

// -----

func.func @layer_norm_grad_eps(%g: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{eps must be > 0, found -1.000000e-05}}
  %0:3 = tx.layer_norm_grad %g, %x, %w eps -1.0e-5 : tensor<2x8x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @rms_norm_grad_scalar(%g: tensor<f32>, %x: tensor<f32>, %w: tensor<1xf32>) {
  // expected-error @+1 {{input must have rank >= 1}}
  %0:2 = tx.rms_norm_grad %g, %x, %w eps 1.0e-5 : tensor<f32>, tensor<1xf32>
  return
}

// -----

func.func @rms_norm_grad_weight(%g: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>, %w: tensor<128xf32>) {
  // expected-error @+1 {{weight has shape [128] but expected [64] (the input's last dimension)}}
  %0:2 = tx.rms_norm_grad %g, %x, %w eps 1.0e-5 : tensor<2x8x64xf32>, tensor<128xf32>
  return
}

// -----

func.func @rms_norm_grad_eps(%g: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{eps must be > 0, found 0}}
  %0:2 = tx.rms_norm_grad %g, %x, %w eps 0.0 : tensor<2x8x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @attention_grad_query_rank(%g: tensor<2x8x64xf32>, %q: tensor<2x8x64xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>) {
  // expected-error @+1 {{query must have rank 4 [batch, seq, heads, head_dim], found [2, 8, 64]}}
  %0:3 = tx.attention_grad %g, %q, %k, %v causal scale 0.25 : tensor<2x8x64xf32>, tensor<2x8x2x16xf32>
  return
}

// -----

func.func @attention_grad_key_rank(%g: tensor<2x8x4x16xf32>, %q: tensor<2x8x4x16xf32>, %k: tensor<2x8x32xf32>, %v: tensor<2x8x32xf32>) {
  // expected-error @+1 {{key must have rank 4 [batch, seq, heads, head_dim], found [2, 8, 32]}}
  %0:3 = tx.attention_grad %g, %q, %k, %v causal scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x32xf32>
  return
}

// -----

func.func @attention_grad_key_seq(%g: tensor<2x8x4x16xf32>, %q: tensor<2x8x4x16xf32>, %k: tensor<2x4x2x16xf32>, %v: tensor<2x4x2x16xf32>) {
  // expected-error @+1 {{key has shape [2, 4, 2, 16] but expected [2, 8, 2, 16] (batch, seq and head_dim of the query, any number of query groups)}}
  %0:3 = tx.attention_grad %g, %q, %k, %v causal scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x4x2x16xf32>
  return
}

// -----

// The value check ("value has shape ... (the shape of key)") cannot fire: the op's
// AllTypesMatch constraint on key and value rejects a different value first.
func.func @attention_grad_value(%g: tensor<2x8x4x16xf32>, %q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x4x16xf32>) {
  // expected-error @+1 {{failed to verify that all of {key, value, key_grad, value_grad} have same type}}
  %0:3 = "tx.attention_grad"(%g, %q, %k, %v) <{scale = 2.5e-01 : f64}>
      : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>)
      -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
  return
}

// -----

func.func @attention_grad_groups(%g: tensor<2x8x4x16xf32>, %q: tensor<2x8x4x16xf32>, %k: tensor<2x8x3x16xf32>, %v: tensor<2x8x3x16xf32>) {
  // expected-error @+1 {{query heads (4) must be a multiple of key/value heads (3)}}
  %0:3 = tx.attention_grad %g, %q, %k, %v causal scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x3x16xf32>
  return
}

// -----

func.func @attention_grad_element_type(%g: tensor<2x8x4x16xf32>, %q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xbf16>, %v: tensor<2x8x2x16xbf16>) {
  // expected-error @+1 {{operand has element type 'bf16' but expected 'f32'}}
  %0:3 = tx.attention_grad %g, %q, %k, %v causal scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xbf16>
  return
}

// -----

func.func @cross_entropy_grad_rank(%d: tensor<f32>, %l: tensor<257xf32>, %y: tensor<i32>) {
  // expected-error @+1 {{logits must be [..., vocab] with rank >= 2, found [257]}}
  %0 = tx.cross_entropy_grad %d, %l, %y : tensor<f32>, tensor<257xf32>, tensor<i32>
  return
}

// -----

func.func @cross_entropy_grad_labels(%d: tensor<f32>, %l: tensor<2x8x257xf32>, %y: tensor<2x4xi32>) {
  // expected-error @+1 {{labels has shape [2, 4] but expected [2, 8] (the logits' shape without the vocab dimension)}}
  %0 = tx.cross_entropy_grad %d, %l, %y : tensor<f32>, tensor<2x8x257xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @cross_entropy_grad_not_scalar(%d: tensor<2x8xf32>, %l: tensor<2x8x257xf32>, %y: tensor<2x8xi32>) {
  // expected-error @+1 {{operand #0 must be 0D tensor of floating-point values}}
  %0 = tx.cross_entropy_grad %d, %l, %y : tensor<2x8xf32>, tensor<2x8x257xf32>, tensor<2x8xi32>
  return
}
