// RUN: megac-opt %s --megac-test-factor-rules 2>&1 | FileCheck %s
// Each op's sharding rule in factors (dialects/tx/TxFactorRule.h), one op per check line: which
// dimensions move together, which the op sums over (reduction: a split leaves partial sums) and
// which it cannot split (need_replication).

func.func @rules(%x: tensor<2x16x32xf32>, %ids: tensor<2x16xi32>, %dy: tensor<2x16x32xf32>, %dloss: tensor<f32>) {
  // CHECK: remark: () -> ([i, j]) {i=64, j=32}{{$}}
  %wte = tx.param "wte" init(normal) : tensor<64x32xf32>
  // CHECK: remark: ([k, l], [i, j]) -> ([i, j, l]) {i=2, j=16, k=64, l=32} reduction={k}{{$}}
  %e = tx.embedding %wte[%ids] : tensor<64x32xf32>, tensor<2x16xi32> -> tensor<2x16x32xf32>
  // CHECK: remark: ([i, j, k], [k, l]) -> ([i, j, l]) {i=2, j=16, k=32, l=96} reduction={k}{{$}}
  %w = tx.param "w" init(normal) : tensor<32x96xf32>
  %h = tx.matmul %x, %w : tensor<2x16x32xf32>, tensor<32x96xf32> -> tensor<2x16x96xf32>
  // CHECK: remark: ([i, j, k]) -> ([(i, j), k]) {i=2, j=16, k=96}{{$}}
  %h2 = tx.reshape %h : tensor<2x16x96xf32> -> tensor<32x96xf32>
  // The tied head: the table transposed, the vocabulary a column.
  // CHECK: remark: ([i, j, k], [l, k]) -> ([i, j, l]) {i=2, j=16, k=32, l=64} reduction={k}{{$}}
  %logits = tx.matmul %x, %wte transpose_rhs : tensor<2x16x32xf32>, tensor<64x32xf32> -> tensor<2x16x64xf32>
  // Batched: the batch shared by both operands.
  // CHECK: remark: ([i, j, k], [i, l, k]) -> ([i, j, l]) {i=2, j=16, k=32, l=16} reduction={k}{{$}}
  %b = tx.matmul %x, %dy transpose_rhs : tensor<2x16x32xf32>, tensor<2x16x32xf32> -> tensor<2x16x16xf32>
  // A weight's gradient: the tokens contracted.
  // CHECK: remark: ([i, j, k]) -> ([(i, j), k]) {i=2, j=16, k=32}{{$}}
  // CHECK: remark: ([j, i], [j, k]) -> ([i, k]) {i=32, j=32, k=96} reduction={j}{{$}}
  %x2 = tx.reshape %x : tensor<2x16x32xf32> -> tensor<32x32xf32>
  %dw = tx.matmul %x2, %h2 transpose_lhs : tensor<32x32xf32>, tensor<32x96xf32> -> tensor<32x96xf32>
  // CHECK: remark: ([i, j, k], [k]) -> ([i, j, k]) {i=2, j=16, k=32}{{$}}
  %nw = tx.param "nw" init(ones) : tensor<32xf32>
  %y = tx.add %x, %nw : tensor<2x16x32xf32>, tensor<32xf32>
  // CHECK: remark: ([i, j, k], [i, j, k]) -> ([i, j, k]) {i=2, j=16, k=32}{{$}}
  %m = tx.mul %x, %dy : tensor<2x16x32xf32>, tensor<2x16x32xf32>
  // Heads out of the hidden dimension: hidden is the product of heads and head_dim.
  // CHECK: remark: ([i, j, (k, l)]) -> ([i, j, k, l]) {i=2, j=16, k=4, l=8}{{$}}
  %q = tx.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  // CHECK: remark: ([i, j, (k, l)]) -> ([i, j, k, l]) {i=2, j=16, k=2, l=16}{{$}}
  %split = tx.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  // CHECK: remark: ([i, j, k]) -> ([i, j, l]) {i=2, j=16, k=32, l=16} need_replication={k, l}{{$}}
  %half = tx.slice %x dim 2 offset 16 : tensor<2x16x32xf32> -> tensor<2x16x16xf32>
  // CHECK: remark: ([i, j, k]) -> ([i, j, l]) {i=2, j=16, k=16, l=32} need_replication={k, l}{{$}}
  %padded = tx.pad %half dim 2 offset 0 : tensor<2x16x16xf32> -> tensor<2x16x32xf32>
  // Norms: rows independent, each row whole.
  // CHECK: remark: ([i, j, k], [k], [k]) -> ([i, j, k]) {i=2, j=16, k=32} need_replication={k}{{$}}
  %ln = tx.layer_norm %x, %nw, %nw eps 1.0e-5 : tensor<2x16x32xf32>, tensor<32xf32>, tensor<32xf32>
  // CHECK: remark: ([i, j, k], [k]) -> ([i, j, k]) {i=2, j=16, k=32} need_replication={k}{{$}}
  %rms = tx.rms_norm %x, %nw eps 1.0e-5 : tensor<2x16x32xf32>, tensor<32xf32>
  // CHECK: remark: ([i, j, k]) -> ([i, j, k]) {i=2, j=16, k=32}{{$}}
  %g = tx.gelu %x (tanh) : tensor<2x16x32xf32>
  // CHECK: remark: ([i, j, k]) -> ([i, j, k]) {i=2, j=16, k=32}{{$}}
  %sc = tx.scale %x by 8.0 : tensor<2x16x32xf32>
  // CHECK: remark: ([i, j, k], [i, j, k]) -> ([i, j, k]) {i=2, j=16, k=32}{{$}}
  %s = tx.swiglu %x, %dy : tensor<2x16x32xf32>, tensor<2x16x32xf32>
  // CHECK: remark: ([i, j, k]) -> ([i, j, k]) {i=2, j=16, k=32}{{$}}
  %d = tx.dropout %x rate 0.1 stream 3 : tensor<2x16x32xf32>
  // CHECK: remark: ([i, j, k, l]) -> ([i, j, k, l]) {i=2, j=16, k=4, l=8} need_replication={j, l}{{$}}
  %qr = tx.rope %q theta 10000.0 : tensor<2x16x4x8xf32>
  // Grouped query heads: 4 query heads over 2 key/value heads, heads = (kv heads, group).
  // CHECK: remark: ([i, j, (l, m), n], [i, k, l, n], [i, k, l, n]) -> ([i, j, (l, m), n]) {i=2, j=16, k=16, l=2, m=2, n=8} need_replication={j, k, n}{{$}}
  %kv = tx.reshape %h : tensor<2x16x96xf32> -> tensor<2x16x12x8xf32>
  %k = tx.slice %kv dim 2 offset 0 : tensor<2x16x12x8xf32> -> tensor<2x16x2x8xf32>
  %a = tx.attention %qr, %k, %k causal scale 0.35 : tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32> -> tensor<2x16x4x8xf32>
  // CHECK: remark: ([i, j, (l, m), n], [i, j, (l, m), n], [i, k, l, n], [i, k, l, n]) -> ([i, j, (l, m), n], [i, k, l, n], [i, k, l, n]) {i=2, j=16, k=16, l=2, m=2, n=8} need_replication={j, k, n}{{$}}
  %ag:3 = tx.attention_grad %a, %qr, %k, %k causal scale 0.35 : tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>
  // The loss: tokens summed over, the vocabulary whole.
  // CHECK: remark: ([i, j, k], [i, j]) -> ([]) {i=2, j=16, k=64} reduction={i, j} need_replication={k}{{$}}
  %loss = tx.cross_entropy %logits, %ids : tensor<2x16x64xf32>, tensor<2x16xi32> -> tensor<f32>
  // CHECK: remark: ([], [i, j, k], [i, j]) -> ([i, j, k]) {i=2, j=16, k=64} need_replication={k}{{$}}
  %dl = tx.cross_entropy_grad %dloss, %logits, %ids : tensor<f32>, tensor<2x16x64xf32>, tensor<2x16xi32>
  // CHECK: remark: ([i, j, l], [i, j]) -> ([k, l]) {i=2, j=16, k=64, l=32} reduction={i, j}{{$}}
  %dt = tx.embedding_grad %dy, %ids : tensor<2x16x32xf32>, tensor<2x16xi32> -> tensor<64x32xf32>
  // The weight's and bias's gradients sum over the rows; the input's gradient keeps them.
  // CHECK: remark: ([i, j, k], [i, j, k], [k]) -> ([i, j, k], [k], [k]) {i=2, j=16, k=32} need_replication={k}{{$}}
  %lg:3 = tx.layer_norm_grad %dy, %x, %nw eps 1.0e-5 : tensor<2x16x32xf32>, tensor<32xf32>
  // CHECK: remark: ([i, j, k], [i, j, k], [k]) -> ([i, j, k], [k]) {i=2, j=16, k=32} need_replication={k}{{$}}
  %rg:2 = tx.rms_norm_grad %dy, %x, %nw eps 1.0e-5 : tensor<2x16x32xf32>, tensor<32xf32>
  // CHECK: remark: ([i, j, k], [i, j, k]) -> ([i, j, k]) {i=2, j=16, k=32}{{$}}
  %gg = tx.gelu_grad %dy, %x (tanh) : tensor<2x16x32xf32>
  // CHECK: remark: ([i, j, k], [i, j, k], [i, j, k]) -> ([i, j, k], [i, j, k]) {i=2, j=16, k=32}{{$}}
  %sg:2 = tx.swiglu_grad %dy, %x, %dy : tensor<2x16x32xf32>
  // A bias's gradient: the leading dimensions summed over.
  // CHECK: remark: ([i, j, k]) -> ([k]) {i=2, j=16, k=32} reduction={i, j}{{$}}
  %db = tx.reduce_sum %dy : tensor<2x16x32xf32> -> tensor<32xf32>
  // CHECK: remark: () -> ([i, j, k]) {i=2, j=16, k=32}{{$}}
  %z = tx.zeros : tensor<2x16x32xf32>
  // CHECK: remark: ([i], [i]) -> () {i=32}{{$}}
  tx.param_grad %db to %nw : tensor<32xf32>
  return
}

// Sizes with no common refinement (6 x 4 as 4 x 6): the dimensions involved are one factor that
// cannot be split.
func.func @incompatible_reshape(%x: tensor<2x6x4xf32>) {
  // CHECK: remark: ([i, j, j]) -> ([i, j, j]) {i=2, j=24} need_replication={j}{{$}}
  %y = tx.reshape %x : tensor<2x6x4xf32> -> tensor<2x4x6xf32>
  return
}
