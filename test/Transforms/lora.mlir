// RUN: megac-opt %s --megac-lora -split-input-file | FileCheck %s
// megac-lora on small hand-written forwards (the frontend's @forward and its layer function),
// with the plan's lora_* keys: every tx.param frozen, and on each target module of the layer
// y + ((dropout(x) A^T) B^T) * scaling, A [r, in] and B [out, r] new trainable parameters
// named as PEFT saves them.

// GPT-2's way, rank 2, alpha 4 (scaling 2): the fused c_attn (q and k blocks of one
// checkpoint tensor, q with a bias) gets one A, computed once after its first product, and
// one B per block, added after the bias add (PEFT adds to the whole output). c_proj is
// row-parallel: its A is split on its input, B whole. The norm is frozen, not adapted.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 2, lora_alpha = 4.0 : f64, lora_dropout = 0.0 : f64, lora_target_modules = ["attn.c_attn", "attn.c_proj"], use_rslora = false>}
// CHECK-LABEL: func.func private @layer
// CHECK-SAME:    (%[[X:.*]]: tensor<1x4x8xf32>, %[[LN:.*]]: tensor<8xf32> {megac.frozen}, %[[WQ:.*]]: tensor<8x8xf32> {megac.frozen}, %[[WK:.*]]: tensor<8x8xf32> {megac.frozen}, %[[BQ:.*]]: tensor<8xf32> {megac.frozen}, %[[WO:.*]]: tensor<8x8xf32> {megac.frozen},
// CHECK-SAME:    %[[A:.*]]: tensor<2x8xf32>, %[[BQB:.*]]: tensor<8x2xf32>, %[[BKB:.*]]: tensor<8x2xf32>, %[[OA:.*]]: tensor<2x8xf32>, %[[OB:.*]]: tensor<8x2xf32>)
// CHECK-NEXT:    %[[H:.*]] = tx.rms_norm %[[X]], %[[LN]]
// CHECK-NEXT:    %[[QG:.*]] = tx.matmul %[[H]], %[[WQ]] :
// CHECK-NEXT:    %[[DOWN:.*]] = tx.matmul %[[H]], %[[A]] transpose_rhs : tensor<1x4x8xf32>, tensor<2x8xf32> -> tensor<1x4x2xf32>
// CHECK-NEXT:    %[[Q:.*]] = tx.add %[[QG]], %[[BQ]]
// CHECK-NEXT:    %[[QUP:.*]] = tx.matmul %[[DOWN]], %[[BQB]] transpose_rhs scale 2.000000e+00 : tensor<1x4x2xf32>, tensor<8x2xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT:    %[[QL:.*]] = tx.add %[[Q]], %[[QUP]]
// CHECK-NEXT:    %[[K:.*]] = tx.matmul %[[H]], %[[WK]] :
// CHECK-NEXT:    %[[KUP:.*]] = tx.matmul %[[DOWN]], %[[BKB]] transpose_rhs scale 2.000000e+00
// CHECK-NEXT:    %[[KL:.*]] = tx.add %[[K]], %[[KUP]]
// CHECK-NEXT:    %[[S:.*]] = tx.add %[[QL]], %[[KL]]
// CHECK-NEXT:    %[[O:.*]] = tx.matmul %[[S]], %[[WO]] :
// CHECK-NEXT:    %[[ODOWN:.*]] = tx.matmul %[[S]], %[[OA]] transpose_rhs
// CHECK-NEXT:    %[[OUP:.*]] = tx.matmul %[[ODOWN]], %[[OB]] transpose_rhs scale 2.000000e+00
// CHECK-NEXT:    %[[OL:.*]] = tx.add %[[O]], %[[OUP]]
// CHECK-NEXT:    %[[R:.*]] = tx.add %[[X]], %[[OL]]
// CHECK-NEXT:    return %[[R]]
func.func private @layer(%x: tensor<1x4x8xf32>, %ln_w: tensor<8xf32>, %wq: tensor<8x8xf32>, %wk: tensor<8x8xf32>, %bq: tensor<8xf32>, %wo: tensor<8x8xf32>) -> tensor<1x4x8xf32> {
  %h = tx.rms_norm %x, %ln_w eps 1.0e-05 : tensor<1x4x8xf32>, tensor<8xf32>
  %q_gemm = tx.matmul %h, %wq : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %q = tx.add %q_gemm, %bq : tensor<1x4x8xf32>, tensor<8xf32>
  %k = tx.matmul %h, %wk : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %s = tx.add %q, %k : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %o = tx.matmul %s, %wo : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %r = tx.add %x, %o : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return %r : tensor<1x4x8xf32>
}
// Every call gets its own adapters, named after its layer: A kaiming-uniform, B zeros (training
// starts from the base model), c_attn's B split as its weight is (at/of), placed with the base.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    tx.param "transformer.wte.weight" {{.*}} frozen :
// CHECK:         tx.param "transformer.h.0.attn.c_proj.weight" {{.*}} frozen :
// CHECK-NEXT:    tx.param "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight" init(kaiming_uniform) : tensor<2x8xf32>
// CHECK-NEXT:    tx.param "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight" at [0, 0] of [16, 2] role column_parallel_weight parallel_dim 0 init(zeros) : tensor<8x2xf32>
// CHECK-NEXT:    tx.param "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight" at [8, 0] of [16, 2] role column_parallel_weight parallel_dim 0 init(zeros) : tensor<8x2xf32>
// CHECK-NEXT:    tx.param "base_model.model.transformer.h.0.attn.c_proj.lora_A.weight" role row_parallel_weight parallel_dim 1 init(kaiming_uniform) : tensor<2x8xf32>
// CHECK-NEXT:    tx.param "base_model.model.transformer.h.0.attn.c_proj.lora_B.weight" init(zeros) : tensor<8x2xf32>
// CHECK-NEXT:    call @layer({{.*}}) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<2x8xf32>, tensor<8x2xf32>, tensor<8x2xf32>, tensor<2x8xf32>, tensor<8x2xf32>) -> tensor<1x4x8xf32>
// CHECK:         tx.param "base_model.model.transformer.h.1.attn.c_proj.lora_B.weight"
// CHECK-NEXT:    call @layer({{.*}}) {megac.layer_index = 1 : i64}
// CHECK-NOT:     tx.param
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "transformer.wte.weight" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %ln0 = tx.param "transformer.h.0.ln_1.weight" role norm init(ones) : tensor<8xf32>
  %wq0 = tx.param "transformer.h.0.attn.c_attn.weight" at [0, 0] of [8, 16] role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %wk0 = tx.param "transformer.h.0.attn.c_attn.weight" at [0, 8] of [8, 16] role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %bq0 = tx.param "transformer.h.0.attn.c_attn.bias" at [0] of [16] role column_parallel_bias parallel_dim 0 init(zeros) : tensor<8xf32>
  %wo0 = tx.param "transformer.h.0.attn.c_proj.weight" role row_parallel_weight parallel_dim 0 init(normal) : tensor<8x8xf32>
  %l0 = call @layer(%e, %ln0, %wq0, %wk0, %bq0, %wo0) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %ln1 = tx.param "transformer.h.1.ln_1.weight" role norm init(ones) : tensor<8xf32>
  %wq1 = tx.param "transformer.h.1.attn.c_attn.weight" at [0, 0] of [8, 16] role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %wk1 = tx.param "transformer.h.1.attn.c_attn.weight" at [0, 8] of [8, 16] role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %bq1 = tx.param "transformer.h.1.attn.c_attn.bias" at [0] of [16] role column_parallel_bias parallel_dim 0 init(zeros) : tensor<8xf32>
  %wo1 = tx.param "transformer.h.1.attn.c_proj.weight" role row_parallel_weight parallel_dim 0 init(normal) : tensor<8x8xf32>
  %l1 = call @layer(%l0, %ln1, %wq1, %wk1, %bq1, %wo1) {megac.layer_index = 1 : i64} : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l1, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Llama's way ([out, in] weights read transposed), rank 4, alpha 8 with use_rslora (scaling
// alpha / sqrt(r) = 4, not alpha / r = 2), dropout 0.1 on each adapter's input, module m
// drawing stream 16 + m. v_proj is not a target: frozen, no adapter.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 4, lora_alpha = 8.0 : f64, lora_dropout = 0.1 : f64, lora_target_modules = ["mlp.up_proj", "mlp.down_proj"], use_rslora = true>}
// CHECK-LABEL: func.func private @layer
// CHECK-SAME:    (%[[X:.*]]: tensor<1x4x8xf32>, %[[WU:.*]]: tensor<16x8xf32> {megac.frozen}, %[[WV:.*]]: tensor<8x8xf32> {megac.frozen}, %[[WD:.*]]: tensor<8x16xf32> {megac.frozen},
// CHECK-SAME:    %[[UA:.*]]: tensor<4x8xf32>, %[[UB:.*]]: tensor<16x4xf32>, %[[DA:.*]]: tensor<4x16xf32>, %[[DB:.*]]: tensor<8x4xf32>)
// CHECK-NEXT:    %[[U:.*]] = tx.matmul %[[X]], %[[WU]] transpose_rhs
// CHECK-NEXT:    %[[XD:.*]] = tx.dropout %[[X]] rate 1.000000e-01 stream 16
// CHECK-NEXT:    %[[UD:.*]] = tx.matmul %[[XD]], %[[UA]] transpose_rhs
// CHECK-NEXT:    %[[UU:.*]] = tx.matmul %[[UD]], %[[UB]] transpose_rhs scale 4.000000e+00
// CHECK-NEXT:    %[[UL:.*]] = tx.add %[[U]], %[[UU]]
// CHECK-NEXT:    %[[G:.*]] = tx.gelu %[[UL]]
// CHECK-NEXT:    %[[V:.*]] = tx.matmul %[[X]], %[[WV]] transpose_rhs
// CHECK-NEXT:    %[[D:.*]] = tx.matmul %[[G]], %[[WD]] transpose_rhs
// CHECK-NEXT:    %[[GD:.*]] = tx.dropout %[[G]] rate 1.000000e-01 stream 17
// CHECK-NEXT:    %[[DD:.*]] = tx.matmul %[[GD]], %[[DA]] transpose_rhs : tensor<1x4x16xf32>, tensor<4x16xf32> -> tensor<1x4x4xf32>
// CHECK-NEXT:    %[[DU:.*]] = tx.matmul %[[DD]], %[[DB]] transpose_rhs scale 4.000000e+00
// CHECK-NEXT:    %[[DL:.*]] = tx.add %[[D]], %[[DU]]
// CHECK-NEXT:    tx.add %[[DL]], %[[V]]
func.func private @layer(%x: tensor<1x4x8xf32>, %wu: tensor<16x8xf32>, %wv: tensor<8x8xf32>, %wd: tensor<8x16xf32>) -> tensor<1x4x8xf32> {
  %u = tx.matmul %x, %wu transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %g = tx.gelu %u (tanh) : tensor<1x4x16xf32>
  %v = tx.matmul %x, %wv transpose_rhs : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %d = tx.matmul %g, %wd transpose_rhs : tensor<1x4x16xf32>, tensor<8x16xf32> -> tensor<1x4x8xf32>
  %s = tx.add %d, %v : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return %s : tensor<1x4x8xf32>
}
// CHECK-LABEL: func.func @forward
// CHECK:         tx.param "base_model.model.model.layers.0.mlp.up_proj.lora_A.weight" init(kaiming_uniform) : tensor<4x8xf32>
// CHECK-NEXT:    tx.param "base_model.model.model.layers.0.mlp.up_proj.lora_B.weight" role column_parallel_weight parallel_dim 0 init(zeros) : tensor<16x4xf32>
// CHECK-NEXT:    tx.param "base_model.model.model.layers.0.mlp.down_proj.lora_A.weight" role row_parallel_weight parallel_dim 1 init(kaiming_uniform) : tensor<4x16xf32>
// CHECK-NEXT:    tx.param "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight" init(zeros) : tensor<8x4xf32>
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "model.embed_tokens.weight" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %wu = tx.param "model.layers.0.mlp.up_proj.weight" role column_parallel_weight parallel_dim 0 init(normal) : tensor<16x8xf32>
  %wv = tx.param "model.layers.0.self_attn.v_proj.weight" role column_parallel_weight parallel_dim 0 init(normal) : tensor<8x8xf32>
  %wd = tx.param "model.layers.0.mlp.down_proj.weight" role row_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %l0 = call @layer(%e, %wu, %wv, %wd) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l0, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// QLoRA (qlora_block_size): every frozen linear weight of the layer, adapted or not, is kept in
// NF4 and read through a tx.nf4_dequantize made just before its product; the norm weight and
// the embedding (outside the layer) and the adapters stay as they are.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 2, lora_alpha = 2.0 : f64, lora_target_modules = ["mlp.c_fc"], qlora_block_size = 64>}
// CHECK-LABEL: func.func private @layer
// CHECK-SAME:    (%{{.*}}: tensor<1x4x8xf32>, %{{.*}}: tensor<8xf32> {megac.frozen}, %[[FC:.*]]: tensor<8x16xf32> {megac.frozen}, %[[PROJ:.*]]: tensor<16x8xf32> {megac.frozen}, %[[A:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<16x2xf32>)
// CHECK-NEXT:    %[[H:.*]] = tx.rms_norm
// CHECK-NEXT:    %[[FCD:.*]] = tx.nf4_dequantize %[[FC]] : tensor<8x16xf32>
// CHECK-NEXT:    tx.matmul %[[H]], %[[FCD]] :
// CHECK-NEXT:    tx.matmul %[[H]], %[[A]] transpose_rhs :
// CHECK-NEXT:    tx.matmul %{{.*}}, %[[B]] transpose_rhs scale 1.000000e+00 :
// CHECK-NEXT:    tx.add
// CHECK-NEXT:    %[[G:.*]] = tx.gelu
// CHECK-NEXT:    %[[PROJD:.*]] = tx.nf4_dequantize %[[PROJ]] : tensor<16x8xf32>
// CHECK-NEXT:    tx.matmul %[[G]], %[[PROJD]] :
func.func private @layer(%x: tensor<1x4x8xf32>, %ln_w: tensor<8xf32>, %wfc: tensor<8x16xf32>, %wproj: tensor<16x8xf32>) -> tensor<1x4x8xf32> {
  %h = tx.rms_norm %x, %ln_w eps 1.0e-05 : tensor<1x4x8xf32>, tensor<8xf32>
  %fc = tx.matmul %h, %wfc : tensor<1x4x8xf32>, tensor<8x16xf32> -> tensor<1x4x16xf32>
  %g = tx.gelu %fc (tanh) : tensor<1x4x16xf32>
  %p = tx.matmul %g, %wproj : tensor<1x4x16xf32>, tensor<16x8xf32> -> tensor<1x4x8xf32>
  return %p : tensor<1x4x8xf32>
}
// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    tx.param "transformer.wte.weight" role vocab_embedding parallel_dim 0 init(normal) frozen :
// CHECK-NEXT:    tx.embedding
// CHECK-NEXT:    tx.param "transformer.h.0.ln_2.weight" role norm init(ones) frozen :
// CHECK-NEXT:    tx.param "transformer.h.0.mlp.c_fc.weight" {{.*}} frozen nf4 64 :
// CHECK-NEXT:    tx.param "transformer.h.0.mlp.c_proj.weight" {{.*}} frozen nf4 64 :
// CHECK-NEXT:    tx.param "base_model.model.transformer.h.0.mlp.c_fc.lora_A.weight" init(kaiming_uniform) :
// CHECK-NEXT:    tx.param "base_model.model.transformer.h.0.mlp.c_fc.lora_B.weight" role column_parallel_weight parallel_dim 0 init(zeros) :
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "transformer.wte.weight" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %ln = tx.param "transformer.h.0.ln_2.weight" role norm init(ones) : tensor<8xf32>
  %wfc = tx.param "transformer.h.0.mlp.c_fc.weight" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x16xf32>
  %wproj = tx.param "transformer.h.0.mlp.c_proj.weight" role row_parallel_weight parallel_dim 0 init(normal) : tensor<16x8xf32>
  %l0 = call @layer(%e, %ln, %wfc, %wproj) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l0, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// An adapted module whose input is another adapted module's output: the second adapter must read
// the first module's adapted output (PEFT: lora_B(lora_A(dropout(x))) of the layer's input x).
// CHECK-LABEL: func.func private @layer
// CHECK-NEXT:    %[[A:.*]] = tx.matmul %arg0, %arg1 :
// CHECK-NEXT:    %[[DOWN_A:.*]] = tx.matmul %arg0, %arg3 transpose_rhs :
// CHECK-NEXT:    %[[UP_A:.*]] = tx.matmul %[[DOWN_A]], %arg4 transpose_rhs scale
// CHECK-NEXT:    %[[ADAPTED_A:.*]] = tx.add %[[A]], %[[UP_A]] :
// CHECK-NEXT:    %[[B:.*]] = tx.matmul %[[ADAPTED_A]], %arg2 :
// CHECK-NEXT:    %[[DOWN_B:.*]] = tx.matmul %[[ADAPTED_A]], %arg5 transpose_rhs :
// CHECK-NEXT:    %[[UP_B:.*]] = tx.matmul %[[DOWN_B]], %arg6 transpose_rhs scale
// CHECK-NEXT:    %[[ADAPTED_B:.*]] = tx.add %[[B]], %[[UP_B]] :
// CHECK-NEXT:    return %[[ADAPTED_B]]
// CHECK-LABEL: func.func @forward
// CHECK:         tx.param "base_model.model.h.0.b.lora_A.weight"
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 2, lora_alpha = 2.0 : f64, lora_target_modules = ["a", "b"]>}
func.func private @layer(%x: tensor<1x4x8xf32>, %wa: tensor<8x8xf32>, %wb: tensor<8x8xf32>) -> tensor<1x4x8xf32> {
  %ya = tx.matmul %x, %wa : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %yb = tx.matmul %ya, %wb : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  return %yb : tensor<1x4x8xf32>
}
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %wa = tx.param "h.0.a.weight" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %wb = tx.param "h.0.b.weight" role row_parallel_weight parallel_dim 0 init(normal) : tensor<8x8xf32>
  %l0 = call @layer(%e, %wa, %wb) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l0, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// No lora_* keys: nothing changes, nothing is frozen.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, sequence_parallel = false>}
// CHECK-LABEL: func.func @forward
// CHECK-NOT:     frozen
// CHECK-NOT:     lora
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "transformer.wte.weight" role vocab_embedding parallel_dim 0 init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %w = tx.param "transformer.h.0.mlp.c_fc.weight" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %h = tx.matmul %e, %w : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %logits = tx.matmul %h, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
