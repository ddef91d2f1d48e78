// RUN: megac-opt %s -split-input-file -verify-diagnostics
// One rejected input per case; each message names the operand, what was found and what was expected.

func.func @param_empty_name() {
  // expected-error @+1 {{needs a non-empty checkpoint name}}
  %0 = tx.param "" init(zeros) : tensor<4xf32>
  return
}

// -----

func.func @param_scalar() {
  // expected-error @+1 {{'w' must have rank >= 1, found a scalar}}
  %0 = tx.param "w" init(zeros) : tensor<f32>
  return
}

// -----

func.func @param_block_outside() {
  // expected-error @+1 {{'c_attn.weight' block [64, 64] at [0, 160] does not fit in the full shape [64, 192] (dimension 1); only a `padded` block may reach past it}}
  %0 = tx.param "c_attn.weight" at [0, 160] of [64, 192] init(normal) : tensor<64x64xf32>
  return
}

// -----

func.func @param_std_without_normal() {
  // expected-error @+1 {{'b' gives std for init 'zeros'; only 'normal' takes one}}
  %0 = tx.param "b" init(zeros, std = 0.02) : tensor<4xf32>
  return
}

// -----

func.func @param_dynamic(%arg0: index) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of floating-point values}}
  %0 = "tx.param"() <{name = "w", init = 0 : i32}> : () -> tensor<?xf32>
  return
}

// -----

func.func @embedding_table_rank(%t: tensor<4x257x64xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{table must have rank 2 [vocab, hidden], found [4, 257, 64]}}
  %0 = tx.embedding %t[%ids] : tensor<4x257x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @embedding_result(%t: tensor<257x64xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{result has shape [2, 8, 32] but expected [2, 8, 64] (the ids' shape followed by the table's hidden size)}}
  %0 = tx.embedding %t[%ids] : tensor<257x64xf32>, tensor<2x8xi32> -> tensor<2x8x32xf32>
  return
}

// -----

func.func @embedding_float_ids(%t: tensor<257x64xf32>, %ids: tensor<2x8xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = tx.embedding %t[%ids] : tensor<257x64xf32>, tensor<2x8xf32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @matmul_contraction(%x: tensor<2x8x64xf32>, %w: tensor<32x256xf32>) {
  // expected-error @+1 {{contraction sizes differ: lhs [2, 8, 64] gives 64, rhs [32, 256] gives 32}}
  %0 = tx.matmul %x, %w : tensor<2x8x64xf32>, tensor<32x256xf32> -> tensor<2x8x256xf32>
  return
}

// -----

func.func @matmul_transposed_contraction(%x: tensor<2x8x64xf32>, %w: tensor<64x256xf32>) {
  // transpose_rhs reads the weight as [N, K]: K is 256 here.
  // expected-error @+1 {{contraction sizes differ: lhs [2, 8, 64] gives 64, rhs [64, 256] gives 256}}
  %0 = tx.matmul %x, %w transpose_rhs : tensor<2x8x64xf32>, tensor<64x256xf32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x4x8x16xf32>, %b: tensor<2x2x16x8xf32>) {
  // expected-error @+1 {{batch dimensions differ: lhs [2, 4, 8, 16], rhs [2, 2, 16, 8]}}
  %0 = tx.matmul %a, %b : tensor<2x4x8x16xf32>, tensor<2x2x16x8xf32> -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @matmul_rhs_rank(%a: tensor<2x4x8x16xf32>, %b: tensor<4x16x8xf32>) {
  // expected-error @+1 {{rhs must be a matrix or have the rank of lhs [2, 4, 8, 16], found [4, 16, 8]}}
  %0 = tx.matmul %a, %b : tensor<2x4x8x16xf32>, tensor<4x16x8xf32> -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @matmul_result(%x: tensor<2x8x64xf32>, %w: tensor<64x256xf32>) {
  // expected-error @+1 {{result has shape [2, 8, 64] but expected [2, 8, 256]}}
  %0 = tx.matmul %x, %w : tensor<2x8x64xf32>, tensor<64x256xf32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @add_not_trailing(%x: tensor<2x8x64xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{rhs has shape [8] but expected the shape of lhs [2, 8, 64] or a trailing part of it}}
  %0 = tx.add %x, %b : tensor<2x8x64xf32>, tensor<8xf32>
  return
}

// -----

func.func @mul_too_big(%x: tensor<8x64xf32>, %y: tensor<2x8x64xf32>) {
  // expected-error @+1 {{rhs has shape [2, 8, 64] but expected the shape of lhs [8, 64] or a trailing part of it}}
  %0 = tx.mul %x, %y : tensor<8x64xf32>, tensor<2x8x64xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{cannot reshape [2, 8, 64] (1024 elements) to [2, 8, 4, 8] (512 elements)}}
  %0 = tx.reshape %x : tensor<2x8x64xf32> -> tensor<2x8x4x8xf32>
  return
}

// -----

func.func @slice_outside(%x: tensor<2x8x192xf32>) {
  // expected-error @+1 {{slice [160, 224) of dimension 2 does not fit in the input [2, 8, 192]}}
  %0 = tx.slice %x dim 2 offset 160 : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @slice_other_dim(%x: tensor<2x8x192xf32>) {
  // expected-error @+1 {{result has shape [2, 4, 64] but expected [2, 8, 64] (the input's shape except along the sliced dimension)}}
  %0 = tx.slice %x dim 2 offset 0 : tensor<2x8x192xf32> -> tensor<2x4x64xf32>
  return
}

// -----

func.func @slice_bad_dim(%x: tensor<2x8x192xf32>) {
  // expected-error @+1 {{dim 3 is outside the input [2, 8, 192]}}
  %0 = tx.slice %x dim 3 offset 0 : tensor<2x8x192xf32> -> tensor<2x8x192xf32>
  return
}

// -----

func.func @layer_norm_weight(%x: tensor<2x8x64xf32>, %w: tensor<32xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{weight has shape [32] but expected [64] (the input's last dimension)}}
  %0 = tx.layer_norm %x, %w, %b eps 1.0e-5 : tensor<2x8x64xf32>, tensor<32xf32>, tensor<64xf32>
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>, %b: tensor<8x64xf32>) {
  // expected-error @+1 {{bias has shape [8, 64] but expected [64] (the input's last dimension)}}
  %0 = tx.layer_norm %x, %w, %b eps 1.0e-5 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<8x64xf32>
  return
}

// -----

func.func @layer_norm_eps(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{eps must be > 0, found 0}}
  %0 = tx.layer_norm %x, %w, %b eps 0.0 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<2x8x64xf32>, %w: tensor<128xf32>) {
  // expected-error @+1 {{weight has shape [128] but expected [64] (the input's last dimension)}}
  %0 = tx.rms_norm %x, %w eps 1.0e-5 : tensor<2x8x64xf32>, tensor<128xf32>
  return
}

// -----

func.func @gelu_integer(%x: tensor<2x8xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of floating-point values}}
  %0 = tx.gelu %x (tanh) : tensor<2x8xi32>
  return
}

// -----

func.func @gelu_unknown_approximation(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'approximation' [tanh, erf]}}
  %0 = tx.gelu %x (sigmoid) : tensor<2x8xf32>
  return
}

// -----

func.func @swiglu_shapes(%g: tensor<2x8x256xf32>, %u: tensor<2x8x128xf32>) {
  // expected-error @+1 {{up has type 'tensor<2x8x128xf32>' but expected 'tensor<2x8x256xf32>' (the type of gate)}}
  %0 = tx.swiglu %g, %u : tensor<2x8x256xf32>, tensor<2x8x128xf32>
  return
}

// -----

func.func @dropout_rate(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{rate must be in [0, 1), found 1}}
  %0 = tx.dropout %x rate 1.0 stream 0 : tensor<2x8x64xf32>
  return
}

// -----

func.func @dropout_stream(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{stream must be in [0, 255], found 256}}
  %0 = tx.dropout %x rate 0.1 stream 256 : tensor<2x8x64xf32>
  return
}

// -----

func.func @cross_entropy_ignore_index_positive(%l: tensor<2x8x16xf32>, %y: tensor<2x8xi32>) {
  // expected-error @+1 {{ignore_index must be negative (transformers': -100), found 3}}
  %0 = tx.cross_entropy %l, %y ignore_index 3 : tensor<2x8x16xf32>, tensor<2x8xi32> -> tensor<f32>
  return
}

// -----

func.func @scale_infinite(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{factor must be finite (at most 1e30 in size), found INF}}
  %0 = tx.scale %x by 0x7FF0000000000000 : tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_offset_nan(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{weight_offset must be finite, found nan}}
  %0 = tx.rms_norm %x, %w eps 1.0e-6 weight_offset 0x7FF8000000000000 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @attention_window_not_causal(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x16xf32>, %v: tensor<1x8x2x16xf32>) {
  // expected-error @+1 {{a window needs causal attention (a window looks back from its query)}}
  %0 = tx.attention %q, %k, %v window 3 scale 0.25 : tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32> -> tensor<1x8x4x16xf32>
  return
}

// -----

func.func @attention_grad_window_zero(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x16xf32>) {
  // expected-error @+1 {{window must be >= 1 (the keys before the query it sees), found 0}}
  %0:3 = tx.attention_grad %q, %q, %k, %k causal window 0 scale 0.25 : tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>
  return
}

// -----

func.func @attention_dropout_rate(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x16xf32>, %v: tensor<1x8x2x16xf32>) {
  // expected-error @+1 {{dropout rate must be in [0, 1), found -5.000000e-01}}
  %0 = tx.attention %q, %k, %v causal scale 0.25 dropout -0.5 : tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32> -> tensor<1x8x4x16xf32>
  return
}

// -----

func.func @rope_rank(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{input must have rank 4 [batch, seq, heads, head_dim], found [2, 8, 64]}}
  %0 = tx.rope %x theta 10000.0 : tensor<2x8x64xf32>
  return
}

// -----

func.func @rope_odd_head_dim(%x: tensor<2x8x4x15xf32>) {
  // expected-error @+1 {{head_dim must be even to rotate pairs, found 15}}
  %0 = tx.rope %x theta 10000.0 : tensor<2x8x4x15xf32>
  return
}

// -----

func.func @rope_positions_divided_by_zero(%x: tensor<2x8x4x16xf32>) {
  // expected-error @+1 {{positions_divided_by must be above 0 and at most 1e6, found 0}}
  %0 = tx.rope %x theta 10000.0 positions_divided_by 0.0 : tensor<2x8x4x16xf32>
  return
}

// -----

func.func @attention_groups(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x3x16xf32>, %v: tensor<2x8x3x16xf32>) {
  // expected-error @+1 {{query heads (4) must be a multiple of key/value heads (3)}}
  %0 = tx.attention %q, %k, %v causal scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32> -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @attention_key_seq(%q: tensor<2x8x4x16xf32>, %k: tensor<2x4x2x16xf32>, %v: tensor<2x4x2x16xf32>) {
  // expected-error @+1 {{key has shape [2, 4, 2, 16] but expected [2, 8, 2, 16] (batch, seq and head_dim of the query, any number of query groups)}}
  %0 = tx.attention %q, %k, %v causal scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x4x2x16xf32>, tensor<2x4x2x16xf32> -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @attention_value(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x4x16xf32>) {
  // expected-error @+1 {{value has shape [2, 8, 4, 16] but expected [2, 8, 2, 16] (the shape of key)}}
  %0 = tx.attention %q, %k, %v causal scale 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32> -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<2x8x257xf32>, %y: tensor<2x4xi32>) {
  // expected-error @+1 {{labels has shape [2, 4] but expected [2, 8] (the logits' shape without the vocab dimension)}}
  %0 = tx.cross_entropy %l, %y : tensor<2x8x257xf32>, tensor<2x4xi32> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_result(%l: tensor<2x8x257xf32>, %y: tensor<2x8xi32>) {
  // expected-error @+1 {{result #0 must be 0D tensor of floating-point values}}
  %0 = tx.cross_entropy %l, %y : tensor<2x8x257xf32>, tensor<2x8xi32> -> tensor<2x8xf32>
  return
}

// -----

func.func @matmul_bias_contraction(%x: tensor<2x8x64xf32>, %w: tensor<32x256xf32>, %b: tensor<256xf32>) {
  // expected-error @+1 {{contraction sizes differ: input [2, 8, 64] gives 64, weight [32, 256] gives 32}}
  %0 = tx.matmul_bias %x, %w, %b : tensor<2x8x64xf32>, tensor<32x256xf32>, tensor<256xf32> -> tensor<2x8x256xf32>
  return
}

// -----

func.func @matmul_bias_gelu_bias(%x: tensor<2x8x64xf32>, %w: tensor<256x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{bias has shape [64] but expected [256] (the weight's output dimension)}}
  %0:2 = tx.matmul_bias_gelu %x, %w, %b transpose_rhs (erf) : tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<64xf32> -> tensor<2x8x256xf32>
  return
}

// -----

func.func @param_split_role_without_dim() {
  // expected-error @+1 {{'w' is a column_parallel_weight, which tensor parallelism splits: it needs a parallel_dim below its rank 2}}
  %0 = tx.param "w" role column_parallel_weight init(normal) : tensor<8x16xf32>
  return
}

// -----

func.func @param_split_dim_out_of_range() {
  // expected-error @+1 {{'wte' is a vocab_embedding, which tensor parallelism splits: it needs a parallel_dim below its rank 2}}
  %0 = tx.param "wte" role vocab_embedding parallel_dim 2 init(normal) : tensor<16x8xf32>
  return
}

// -----

func.func @param_whole_role_with_dim() {
  // expected-error @+1 {{'ln.weight' has parallel_dim 0 but its role (norm) keeps it whole on every tensor-parallel rank}}
  %0 = tx.param "ln.weight" role norm parallel_dim 0 init(ones) : tensor<8xf32>
  return
}

// -----

// expected-error @+1 {{grid axis "tp" is used twice; a value is split over an axis, or partial over it, at most once}}
func.func @sharding_axis_twice() attributes {s = #tx.sharding<[{"tp"}, {}], partial={"tp"}>} {
  return
}

// -----

// expected-error @+1 {{expected '{'}}
func.func @sharding_not_a_list() attributes {s = #tx.sharding<[tp]>} {
  return
}
