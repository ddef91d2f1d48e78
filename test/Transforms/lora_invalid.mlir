// RUN: megac-opt %s -split-input-file -verify-diagnostics --megac-lora
// Programs megac-lora rejects, one per case, each saying what to change.

// A target module the layer has no weight of.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 2, lora_alpha = 2.0 : f64, lora_target_modules = ["mlp.c_fc", "attn.q_proj"]>}
// expected-error @+1 {{'func.func' op megac-lora: lora_target_modules names attn.q_proj, but no argument of the layer is its weight (attn.q_proj.weight)}}
func.func private @layer(%x: tensor<1x4x8xf32>, %w: tensor<8x8xf32>) -> tensor<1x4x8xf32> {
  %y = tx.matmul %x, %w : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %w = tx.param "h.0.mlp.c_fc.weight" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %l0 = call @layer(%e, %w) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l0, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The adapted weight must be one product's rhs: here two products read it.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 2, lora_alpha = 2.0 : f64, lora_target_modules = ["mlp.c_fc"]>}
// expected-error @+1 {{'func.func' op megac-lora: h.0.mlp.c_fc.weight must be read by exactly one tx.matmul as its (untransposed) weight to be adapted}}
func.func private @layer(%x: tensor<1x4x8xf32>, %w: tensor<8x8xf32>) -> tensor<1x4x8xf32> {
  %y = tx.matmul %x, %w : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %z = tx.matmul %y, %w : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  return %z : tensor<1x4x8xf32>
}
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %w = tx.param "h.0.mlp.c_fc.weight" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %l0 = call @layer(%e, %w) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l0, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A scaled product is not a base layer's.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 2, lora_alpha = 2.0 : f64, lora_target_modules = ["mlp.c_fc"]>}
// expected-error @+1 {{'func.func' op megac-lora: h.0.mlp.c_fc.weight must be read by exactly one tx.matmul as its (untransposed) weight to be adapted}}
func.func private @layer(%x: tensor<1x4x8xf32>, %w: tensor<8x8xf32>) -> tensor<1x4x8xf32> {
  %y = tx.matmul %x, %w scale 2.0 : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %w = tx.param "h.0.mlp.c_fc.weight" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %l0 = call @layer(%e, %w) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l0, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Only a column- or row-parallel weight is a linear layer's.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 2, lora_alpha = 2.0 : f64, lora_target_modules = ["mlp.c_fc"]>}
func.func private @layer(%x: tensor<1x4x8xf32>, %w: tensor<8x8xf32>) -> tensor<1x4x8xf32> {
  %y = tx.matmul %x, %w : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  // expected-error @+1 {{'tx.param' op megac-lora: mlp.c_fc is not a linear layer's weight (role none)}}
  %w = tx.param "h.0.mlp.c_fc.weight" init(normal) : tensor<8x8xf32>
  %l0 = call @layer(%e, %w) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l0, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The blocks of one fused module share one A, so they must read one input.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 2, lora_alpha = 2.0 : f64, lora_target_modules = ["attn.c_attn"]>}
func.func private @layer(%x: tensor<1x4x8xf32>, %wq: tensor<8x8xf32>, %wk: tensor<8x8xf32>) -> tensor<1x4x8xf32> {
  %q = tx.matmul %x, %wq : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  // expected-error @+1 {{'tx.matmul' op megac-lora: the blocks of attn.c_attn read different inputs}}
  %k = tx.matmul %q, %wk : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  return %k : tensor<1x4x8xf32>
}
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %wq = tx.param "h.0.attn.c_attn.weight" at [0, 0] of [8, 16] role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %wk = tx.param "h.0.attn.c_attn.weight" at [0, 8] of [8, 16] role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %l0 = call @layer(%e, %wq, %wk) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l0, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Every call of the layer passes the target's weight where the first does.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 2, lora_alpha = 2.0 : f64, lora_target_modules = ["mlp.c_fc"]>}
func.func private @layer(%x: tensor<1x4x8xf32>, %w: tensor<8x8xf32>) -> tensor<1x4x8xf32> {
  %y = tx.matmul %x, %w : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %w0 = tx.param "h.0.mlp.c_fc.weight" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  %l0 = call @layer(%e, %w0) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %w1 = tx.param "h.1.mlp.c_proj.weight" role column_parallel_weight parallel_dim 1 init(normal) : tensor<8x8xf32>
  // expected-error @+1 {{'func.call' op megac-lora: layer 1 passes no mlp.c_fc.weight where the first layer does}}
  %l1 = call @layer(%l0, %w1) {megac.layer_index = 1 : i64} : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l1, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Adapters go on layers: a forward that calls no layer function has none.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 2, lora_alpha = 2.0 : f64, lora_target_modules = ["mlp.c_fc"]>}
// expected-error @+1 {{'func.func' op megac-lora: calls no layer function (a call with megac.layer_index) to add adapters to}}
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %logits = tx.matmul %e, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// It runs on the frontend's @forward, before megac-autodiff.
// expected-error @+1 {{megac-lora: no @forward to add adapters to (it runs on the frontend's module, before megac-autodiff)}}
module {
  shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 2, lora_alpha = 2.0 : f64, lora_target_modules = ["mlp.c_fc"]>}
}

// -----

// The plan's LoRA keys come together.
// expected-error @+2 {{megac.plan: LoRA needs lora_rank, lora_alpha and lora_target_modules together}}
module {
  shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, lora_rank = 2>}
}
