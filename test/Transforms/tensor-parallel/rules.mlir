// RUN: megac-opt %s --megac-tensor-parallel -split-input-file -verify-diagnostics | FileCheck %s
// megac-tensor-parallel on small hand-written IR, one Megatron rule per case. The plan (tp 2)
// is in @grid; every value gets its rank-local type and its sharding (#tx.sharding), and every
// collective the rule that put it there.

// Megatron's MLP: a ColumnParallelLinear (weight split on its output features) needs nothing
// forward; the RowParallelLinear after it (weight split on its input features) gives partial
// sums, reduced once before the residual add (Megatron's "g").
// CHECK-LABEL: func.func @train_step
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32> {megac.sharding = #tx.sharding<[{}, {}, {}]>})
// CHECK:         %[[W1:.*]] = tx.param "fc1" at [0, 0] of [8, 16] role column_parallel_weight parallel_dim 1 init(normal) {megac.sharding = #tx.sharding<[{}, {"tp"}]>} : tensor<8x8xf32>
// CHECK:         %[[H:.*]] = tx.matmul %[[X]], %[[W1]] {megac.sharding = #tx.sharding<[{}, {}, {"tp"}]>} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
// CHECK:         %[[G:.*]] = tx.gelu %[[H]] (tanh) {megac.sharding = #tx.sharding<[{}, {}, {"tp"}]>} : tensor<2x4x8xf32>
// CHECK:         %[[W2:.*]] = tx.param "fc2" at [0, 0] of [16, 8] role row_parallel_weight parallel_dim 0 {{.*}} : tensor<8x8xf32>
// CHECK:         %[[P:.*]] = tx.matmul %[[G]], %[[W2]] {megac.sharding = #tx.sharding<[{}, {}, {}], partial={"tp"}>}
// CHECK-NEXT:    %[[SUM:.*]] = shard.all_reduce %[[P]] on @grid grid_axes = [2] {megac.rule = "row-parallel output (Megatron's g): partial sums over tp reduced before tx.add", megac.sharding = #tx.sharding<[{}, {}, {}]>}
// CHECK-NEXT:    tx.add %[[X]], %[[SUM]]
// CHECK-NEXT:    return
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = false>}
func.func @train_step(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w1 = tx.param "fc1" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %h = tx.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %g = tx.gelu %h (tanh) : tensor<2x4x16xf32>
  %w2 = tx.param "fc2" role row_parallel_weight parallel_dim 0 init(normal) : tensor<16x8xf32>
  %o = tx.matmul %g, %w2 : tensor<2x4x16xf32>, tensor<16x8xf32> -> tensor<2x4x8xf32>
  %r = tx.add %x, %o : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}

// -----

// A column-parallel bias is split like the outputs it is added to; a row-parallel bias is
// whole and added once, after the partial sums are reduced.
// CHECK-LABEL: func.func @train_step
// CHECK:         tx.param "fc1.bias" at [0] of [16] role column_parallel_bias parallel_dim 0 {{.*}} : tensor<8xf32>
// CHECK:         tx.add {{.*}} {megac.sharding = #tx.sharding<[{}, {"tp"}]>} : tensor<4x8xf32>, tensor<8xf32>
// CHECK-NOT:     shard.
// CHECK:         %[[P:.*]] = tx.matmul {{.*}} {megac.sharding = #tx.sharding<[{}, {}], partial={"tp"}>}
// CHECK:         %[[B:.*]] = tx.param "fc2.bias" role row_parallel_bias {{.*}} {megac.sharding = #tx.sharding<[{}]>} : tensor<8xf32>
// CHECK-NEXT:    %[[SUM:.*]] = shard.all_reduce %[[P]] {{.*}} {megac.rule = "row-parallel output (Megatron's g): partial sums over tp reduced before tx.add"
// CHECK-NEXT:    tx.add %[[SUM]], %[[B]] {megac.sharding = #tx.sharding<[{}, {}]>}
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = false>}
func.func @train_step(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = tx.param "fc1.weight" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %h = tx.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %b1 = tx.param "fc1.bias" role column_parallel_bias parallel_dim 0 init(zeros) : tensor<16xf32>
  %hb = tx.add %h, %b1 : tensor<4x16xf32>, tensor<16xf32>
  %w2 = tx.param "fc2.weight" role row_parallel_weight parallel_dim 0 init(normal) : tensor<16x8xf32>
  %o = tx.matmul %hb, %w2 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %b2 = tx.param "fc2.bias" role row_parallel_bias init(zeros) : tensor<8xf32>
  %ob = tx.add %o, %b2 : tensor<4x8xf32>, tensor<8xf32>
  return %ob : tensor<4x8xf32>
}

// -----

// VocabParallelEmbedding: each rank looks up its share of the vocabulary (other ids give zero
// rows), so the lookup is a partial sum, reduced before the first non-linear use.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[T:.*]] = tx.param "wte" at [0, 0] of [32, 8] role vocab_embedding parallel_dim 0 {{.*}} : tensor<16x8xf32>
// CHECK-NEXT:    %[[E:.*]] = tx.embedding %[[T]][%{{.*}}] vocab_parallel {megac.sharding = #tx.sharding<[{}, {}, {}], partial={"tp"}>} : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
// CHECK-NEXT:    shard.all_reduce %[[E]] {{.*}} {megac.rule = "vocab-parallel embedding: partial sums over tp reduced before tx.gelu"
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = false>}
func.func @train_step(%ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %t = tx.param "wte" role vocab_embedding parallel_dim 0 init(normal) : tensor<32x8xf32>
  %e = tx.embedding %t[%ids] : tensor<32x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %g = tx.gelu %e (tanh) : tensor<2x4x8xf32>
  return %g : tensor<2x4x8xf32>
}

// -----

// Megatron's vocabulary-parallel cross-entropy: logits split on the vocabulary (an LM head
// split like the embedding) are never gathered; the softmax comes from three all-reduced
// per-token statistics, and its backward from the same statistics.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[L:.*]] = tx.matmul {{.*}} transpose_rhs {megac.sharding = #tx.sharding<[{}, {}, {"tp"}]>} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT:    %[[MAX:.*]] = tx.logits_max %[[L]]
// CHECK-NEXT:    %[[GMAX:.*]] = shard.all_reduce %[[MAX]] {{.*}} reduction = max {megac.rule = "vocab-parallel cross-entropy: max over the vocabulary"
// CHECK-NEXT:    %[[SUM:.*]] = tx.logits_sum_exp %[[L]], %[[GMAX]]
// CHECK-NEXT:    %[[GSUM:.*]] = shard.all_reduce %[[SUM]] {{.*}} {megac.rule = "vocab-parallel cross-entropy: sum of exponentials"
// CHECK-NEXT:    %[[TGT:.*]] = tx.target_logit %[[L]], %{{.*}} vocab_parallel
// CHECK-NEXT:    %[[GTGT:.*]] = shard.all_reduce %[[TGT]] {{.*}} {megac.rule = "vocab-parallel cross-entropy: target logit"
// CHECK-NEXT:    %[[LOSS:.*]] = tx.cross_entropy_from_stats %[[GMAX]], %[[GSUM]], %[[GTGT]]
// CHECK-NEXT:    tx.cross_entropy_grad_from_stats %{{.*}}, %[[L]], %{{.*}}, %[[GMAX]], %[[GSUM]] vocab_parallel {megac.sharding = #tx.sharding<[{}, {}, {"tp"}]>}
// CHECK-NOT:     shard.
// CHECK:         return %[[LOSS]]
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = false>}
func.func @train_step(%x: tensor<2x4x8xf32>, %labels: tensor<2x4xi32>, %dloss: tensor<f32>) -> tensor<f32> {
  %head = tx.param "lm_head" role vocab_embedding parallel_dim 0 init(normal) : tensor<32x8xf32>
  %logits = tx.matmul %x, %head transpose_rhs : tensor<2x4x8xf32>, tensor<32x8xf32> -> tensor<2x4x32xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x4x32xf32>, tensor<2x4xi32> -> tensor<f32>
  %d = tx.cross_entropy_grad %dloss, %logits, %labels : tensor<f32>, tensor<2x4x32xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}

// -----

// Attention on column-parallel q / k / v: each rank runs its heads (and their key / value
// groups); nothing is communicated until the output projection.
// CHECK-LABEL: func.func @train_step
// CHECK:         tx.reshape {{.*}} {megac.sharding = #tx.sharding<[{}, {}, {"tp"}, {}]>} : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
// CHECK:         tx.attention {{.*}} {megac.sharding = #tx.sharding<[{}, {}, {"tp"}, {}]>} : tensor<1x4x2x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32> -> tensor<1x4x2x4xf32>
// CHECK:         tx.reshape {{.*}} : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
// CHECK:         shard.all_reduce {{.*}} {megac.rule = "row-parallel output (Megatron's g): partial sums over tp reduced before tx.add"
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = false>}
func.func @train_step(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %wq = tx.param "q" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %wk = tx.param "k" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %wv = tx.param "v" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %q = tx.matmul %x, %wq : tensor<1x4x8xf32>, tensor<8x16xf32> -> tensor<1x4x16xf32>
  %k = tx.matmul %x, %wk : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %v = tx.matmul %x, %wv : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %qh = tx.reshape %q : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %kh = tx.reshape %k : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %vh = tx.reshape %v : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %a = tx.attention %qh, %kh, %vh causal scale 0.5 : tensor<1x4x4x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32> -> tensor<1x4x4x4xf32>
  %am = tx.reshape %a : tensor<1x4x4x4xf32> -> tensor<1x4x16xf32>
  %wo = tx.param "o" role row_parallel_weight parallel_dim 0 init(normal) : tensor<16x8xf32>
  %o = tx.matmul %am, %wo : tensor<1x4x16xf32>, tensor<16x8xf32> -> tensor<1x4x8xf32>
  %r = tx.add %x, %o : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return %r : tensor<1x4x8xf32>
}

// -----

// Megatron's "f" backward: the input gradient of a ColumnParallelLinear is a partial sum over
// tp, reduced where it meets whole rows again (the norm's backward).
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[DX:.*]] = tx.matmul {{.*}} transpose_rhs {megac.sharding = #tx.sharding<[{}, {}], partial={"tp"}>}
// CHECK-NEXT:    %[[SUM:.*]] = shard.all_reduce %[[DX]] {{.*}} {megac.rule = "column-parallel input gradient (Megatron's f, backward)"
// CHECK-NEXT:    tx.layer_norm_grad %[[SUM]]
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = false>}
func.func @train_step(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %nw = tx.param "norm.weight" role norm init(ones) : tensor<8xf32>
  %w = tx.param "fc1" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  // a gradient of the layer's output: split like it
  %dh = tx.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %dx = tx.matmul %dh, %w transpose_rhs : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
  %g:3 = tx.layer_norm_grad %dx, %x, %nw eps 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>
  return %g#0 : tensor<4x8xf32>
}

// -----

// Sequence parallelism: between the tensor-parallel regions the residual stream is split
// along the sequence. The row-parallel output is reduce-scattered into it (Megatron's "g"), the
// norm runs on each rank's tokens, and the column-parallel layer after it all-gathers them
// ("f").
// CHECK-LABEL: func.func @train_step
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32> {megac.sharding = #tx.sharding<[{}, {}, {}]>})
// CHECK:         %[[P:.*]] = tx.matmul {{.*}} {megac.sharding = #tx.sharding<[{}, {}, {}], partial={"tp"}>}
// CHECK-NEXT:    %[[RS:.*]] = shard.reduce_scatter %[[P]] on @grid grid_axes = [2] scatter_axis = 1 {megac.rule = "sequence parallel: row-parallel output reduce-scattered along the sequence (Megatron's g)", megac.sharding = #tx.sharding<[{}, {"tp"}, {}]>} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// CHECK-NEXT:    %[[XS:.*]] = shard.all_slice %[[X]] {{.*}} slice_axis = 1 {megac.rule = "sequence parallel: residual stream split along the sequence"
// CHECK-NEXT:    %[[R:.*]] = tx.add %[[RS]], %[[XS]] {megac.sharding = #tx.sharding<[{}, {"tp"}, {}]>} : tensor<2x2x8xf32>, tensor<2x2x8xf32>
// CHECK:         %[[N:.*]] = tx.layer_norm %[[R]], {{.*}} {megac.sharding = #tx.sharding<[{}, {"tp"}, {}]>} : tensor<2x2x8xf32>
// CHECK:         %[[AG:.*]] = shard.all_gather %[[N]] {{.*}} gather_axis = 1 {megac.rule = "sequence parallel: all-gather along the sequence before a column-parallel layer"
// CHECK-NEXT:    tx.matmul %[[AG]], {{.*}} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = true>}
func.func @train_step(%x: tensor<2x4x8xf32>) -> tensor<2x4x16xf32> {
  %w1 = tx.param "a" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %h = tx.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %w2 = tx.param "b" role row_parallel_weight parallel_dim 0 init(normal) : tensor<16x8xf32>
  %o = tx.matmul %h, %w2 : tensor<2x4x16xf32>, tensor<16x8xf32> -> tensor<2x4x8xf32>
  %r = tx.add %o, %x : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %nw = tx.param "norm.weight" role norm init(ones) : tensor<8xf32>
  %nb = tx.param "norm.bias" role norm init(zeros) : tensor<8xf32>
  %n = tx.layer_norm %r, %nw, %nb eps 1.0e-5 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %w3 = tx.param "c" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %y = tx.matmul %n, %w3 : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// Sequence parallelism in backward: a norm's weight gradient and a row-parallel bias's gradient
// are made from each rank's tokens, so they are partial sums: each is summed over tp, under its
// own rule (Megatron all-reduces both groups after backward).
// CHECK-LABEL: func.func @train_step
// CHECK:         %{{.*}}, %[[WG:.*]], %{{.*}} = tx.layer_norm_grad {{.*}} : tensor<2x2x8xf32>, tensor<8xf32>
// CHECK:         %[[WSUM:.*]] = shard.all_reduce %[[WG]] {{.*}} {megac.rule = "sequence parallel: norm weight gradient summed over tp"
// CHECK-NEXT:    tx.param_grad %[[WSUM]] to
// CHECK:         %[[BG:.*]] = tx.reduce_sum {{.*}} {megac.sharding = #tx.sharding<[{}], partial={"tp"}>} : tensor<2x2x8xf32> -> tensor<8xf32>
// CHECK-NEXT:    %[[BSUM:.*]] = shard.all_reduce %[[BG]] {{.*}} {megac.rule = "sequence parallel: row-parallel bias gradient summed over tp"
// CHECK-NEXT:    tx.param_grad %[[BSUM]] to
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = true>}
func.func @train_step(%x: tensor<2x4x8xf32>, %dy: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %nw = tx.param "norm.weight" role norm init(ones) : tensor<8xf32>
  %w = tx.param "fc.weight" role row_parallel_weight parallel_dim 0 init(normal) : tensor<8x8xf32>
  %b = tx.param "fc.bias" role row_parallel_bias init(zeros) : tensor<8xf32>
  %p = tx.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %r = tx.add %p, %x : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %g:3 = tx.layer_norm_grad %r, %r, %nw eps 1.0e-5 : tensor<2x4x8xf32>, tensor<8xf32>
  tx.param_grad %g#1 to %nw : tensor<8xf32>
  %db = tx.reduce_sum %g#0 : tensor<2x4x8xf32> -> tensor<8xf32>
  tx.param_grad %db to %b : tensor<8xf32>
  return %g#0 : tensor<2x4x8xf32>
}

// -----

// Rotary embeddings rotate each head by position: a head split stays; the elementwise SwiGLU
// and a product keep their operands' split; slicing along the split dimension makes it whole.
// CHECK-LABEL: func.func @train_step
// CHECK:         tx.rope {{.*}} {megac.sharding = #tx.sharding<[{}, {}, {"tp"}, {}]>} : tensor<1x4x2x4xf32>
// CHECK:         tx.swiglu {{.*}} {megac.sharding = #tx.sharding<[{}, {"tp"}]>} : tensor<4x8xf32>, tensor<4x8xf32>
// CHECK:         tx.mul {{.*}} {megac.sharding = #tx.sharding<[{}, {"tp"}]>} : tensor<4x8xf32>, tensor<4x8xf32>
// CHECK:         %[[G:.*]] = shard.all_gather {{.*}} gather_axis = 1 {megac.rule = "sliced dimension whole"
// CHECK-NEXT:    tx.slice %[[G]] dim 1 offset 4 {megac.sharding = #tx.sharding<[{}, {}]>} : tensor<4x16xf32> -> tensor<4x8xf32>
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = false>}
func.func @train_step(%x: tensor<4x8xf32>, %h: tensor<1x4x8xf32>) -> tensor<4x8xf32> {
  %wq = tx.param "q" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %q = tx.matmul %h, %wq : tensor<1x4x8xf32>, tensor<8x16xf32> -> tensor<1x4x16xf32>
  %qh = tx.reshape %q : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %qr = tx.rope %qh theta 10000.0 : tensor<1x4x4x4xf32>
  %wg = tx.param "gate" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %wu = tx.param "up" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %g = tx.matmul %x, %wg : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %u = tx.matmul %x, %wu : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %s = tx.swiglu %g, %u : tensor<4x16xf32>, tensor<4x16xf32>
  %m = tx.mul %s, %u : tensor<4x16xf32>, tensor<4x16xf32>
  %half = tx.slice %m dim 1 offset 4 : tensor<4x16xf32> -> tensor<4x8xf32>
  return %half : tensor<4x8xf32>
}

// -----

// Backward of a VocabParallelEmbedding: each rank scatters the rows of its share of the
// vocabulary; summing a split gradient over the split dimension (a bias gradient of
// column-parallel outputs) keeps the split, over a leading dimension the other gives partial
// sums.
// CHECK-LABEL: func.func @train_step
// CHECK:         tx.embedding_grad {{.*}} vocab_parallel {megac.sharding = #tx.sharding<[{"tp"}, {}]>} : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<16x8xf32>
// CHECK:         tx.reduce_sum {{.*}} {megac.sharding = #tx.sharding<[{"tp"}]>} : tensor<2x4x8xf32> -> tensor<8xf32>
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = false>}
func.func @train_step(%ids: tensor<2x4xi32>, %dy: tensor<2x4x8xf32>) -> tensor<8xf32> {
  %t = tx.param "wte" role vocab_embedding parallel_dim 0 init(normal) : tensor<32x8xf32>
  %e = tx.embedding %t[%ids] : tensor<32x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %g = tx.gelu %e (tanh) : tensor<2x4x8xf32>
  %dt = tx.embedding_grad %dy, %ids : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<32x8xf32>
  tx.param_grad %dt to %t : tensor<32x8xf32>
  %w = tx.param "fc" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %h = tx.matmul %g, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %db = tx.reduce_sum %h : tensor<2x4x16xf32> -> tensor<16xf32>
  %whole = tx.slice %db dim 0 offset 0 : tensor<16xf32> -> tensor<8xf32>
  return %whole : tensor<8xf32>
}

// -----

// A layer function is sharded once for all its calls; its arguments and results record their
// shardings. Calls with other argument shardings are refused (next case).
// CHECK-LABEL: func.func private @layer
// CHECK-SAME:    (%{{.*}}: tensor<4x8xf32> {megac.sharding = #tx.sharding<[{}, {}]>}, %{{.*}}: tensor<8x8xf32> {megac.sharding = #tx.sharding<[{}, {"tp"}]>})
// CHECK-SAME:    -> (tensor<4x8xf32> {megac.sharding = #tx.sharding<[{}, {"tp"}]>})
// CHECK-LABEL: func.func @train_step
// CHECK-COUNT-2: call @layer
func.func private @layer(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %h = tx.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %h : tensor<4x16xf32>
}
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = false>}
func.func @train_step(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w0 = tx.param "h.0.fc" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %w1 = tx.param "h.1.fc" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %a = call @layer(%x, %w0) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %b = call @layer(%x, %w1) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %x : tensor<4x8xf32>
}

// -----

func.func private @layer(%w: tensor<8x16xf32>) -> tensor<8x16xf32> {
  return %w : tensor<8x16xf32>
}
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = false>}
func.func @train_step(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w0 = tx.param "split" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %w1 = tx.param "whole" role norm init(normal) : tensor<8x16xf32>
  %a = call @layer(%w0) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-error @below {{calls @layer with other argument shardings than an earlier call; every layer must be sharded alike}}
  %b = call @layer(%w1) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %x : tensor<4x8xf32>
}

// -----

// A split tp does not divide is refused, naming the dimension.
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, sequence_parallel = false>}
func.func @train_step(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{tensor parallel size 2 does not divide dimension 1 (size 7) of 'tensor<8x7xf32>'}}
  %w = tx.param "odd" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x7xf32>
  return %x : tensor<4x8xf32>
}

// -----

// Without tensor parallelism in the plan the pass changes nothing.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT:     megac.sharding
// CHECK:         tx.param "fc1" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, sequence_parallel = false>}
func.func @train_step(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = tx.param "fc1" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %h = tx.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %x : tensor<4x8xf32>
}

// -----

// expected-error @below {{megac-tensor-parallel: the module has no shard.grid @grid}}
module {
  func.func @train_step(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    return %x : tensor<4x8xf32>
  }
}
