// RUN: megac-opt %s -split-input-file --megac-autodiff | FileCheck %s
// One behaviour of megac-autodiff per case: a tiny @forward whose loss depends on one op, and
// the backward op(s) that op's VJP adds to @train_step.

// The entry becomes @train_step(ids, labels, dloss) -> loss; dloss seeds cross_entropy_grad.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    %[[IDS:.*]]: tensor<2x3xi32>, %[[LABELS:.*]]: tensor<2x3xi32>, %[[DLOSS:.*]]: tensor<f32>) -> tensor<f32>
// CHECK:         %[[LOGITS:.*]] = tx.param "logits"
// CHECK:         %[[LOSS:.*]] = tx.cross_entropy %[[LOGITS]], %[[LABELS]]
// CHECK:         %[[G:.*]] = tx.cross_entropy_grad %[[DLOSS]], %[[LOGITS]], %[[LABELS]] : tensor<f32>, tensor<2x3x5xf32>, tensor<2x3xi32>
// CHECK:         tx.param_grad %[[G]] to %[[LOGITS]] : tensor<2x3x5xf32>
// CHECK:         return %[[LOSS]] : tensor<f32>
// CHECK-NOT:   func.func @forward
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %logits = tx.param "logits" init(normal) : tensor<2x3x5xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// x @ W with W [K, N] shared by the batch: dx = dy @ W^T; dW = x^T @ dy over the flattened batch.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "matmul.x"
// CHECK:         %[[W:.*]] = tx.param "matmul.w"
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK:         %[[DX:.*]] = tx.matmul %[[DY]], %[[W]] transpose_rhs : tensor<2x3x5xf32>, tensor<4x5xf32> -> tensor<2x3x4xf32>
// CHECK:         tx.param_grad %[[DX]] to %[[X]]
// CHECK:         %[[XF:.*]] = tx.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK:         %[[DYF:.*]] = tx.reshape %[[DY]] : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK:         %[[DW:.*]] = tx.matmul %[[XF]], %[[DYF]] transpose_lhs : tensor<6x4xf32>, tensor<6x5xf32> -> tensor<4x5xf32>
// CHECK:         tx.param_grad %[[DW]] to %[[W]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "matmul.x" init(normal) : tensor<2x3x4xf32>
  %w = tx.param "matmul.w" init(normal) : tensor<4x5xf32>
  %y = tx.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// x @ W^T with W [N, K] (Hugging Face layout): dx = dy @ W; dW = dy^T @ x.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "matmul_t.x"
// CHECK:         %[[W:.*]] = tx.param "matmul_t.w"
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK:         %[[DX:.*]] = tx.matmul %[[DY]], %[[W]] : tensor<2x3x5xf32>, tensor<5x4xf32> -> tensor<2x3x4xf32>
// CHECK:         tx.param_grad %[[DX]] to %[[X]]
// CHECK:         %[[XF:.*]] = tx.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK:         %[[DYF:.*]] = tx.reshape %[[DY]] : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK:         %[[DW:.*]] = tx.matmul %[[DYF]], %[[XF]] transpose_lhs : tensor<6x5xf32>, tensor<6x4xf32> -> tensor<5x4xf32>
// CHECK:         tx.param_grad %[[DW]] to %[[W]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "matmul_t.x" init(normal) : tensor<2x3x4xf32>
  %w = tx.param "matmul_t.w" init(normal) : tensor<5x4xf32>
  %y = tx.matmul %x, %w transpose_rhs : tensor<2x3x4xf32>, tensor<5x4xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A batched rhs (attention scores a @ b^T) gets a batched gradient: no reshape, no reduction.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[A:.*]] = tx.param "bmm.a"
// CHECK:         %[[B:.*]] = tx.param "bmm.b"
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK-NOT:     tx.reshape
// CHECK:         %[[DA:.*]] = tx.matmul %[[DY]], %[[B]] : tensor<2x3x3xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// CHECK:         tx.param_grad %[[DA]] to %[[A]]
// CHECK:         %[[DB:.*]] = tx.matmul %[[DY]], %[[A]] transpose_lhs : tensor<2x3x3xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// CHECK:         tx.param_grad %[[DB]] to %[[B]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %a = tx.param "bmm.a" init(normal) : tensor<2x3x4xf32>
  %b = tx.param "bmm.b" init(normal) : tensor<2x3x4xf32>
  %y = tx.matmul %a, %b transpose_rhs : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x3xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x3xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A bias broadcast over [batch, seq] gets the sum of the cotangent over those dimensions.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "bias_add.x"
// CHECK:         %[[B:.*]] = tx.param "bias_add.b"
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK:         tx.param_grad %[[DY]] to %[[X]]
// CHECK:         %[[DB:.*]] = tx.reduce_sum %[[DY]] : tensor<2x3x5xf32> -> tensor<5xf32>
// CHECK:         tx.param_grad %[[DB]] to %[[B]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "bias_add.x" init(normal) : tensor<2x3x5xf32>
  %b = tx.param "bias_add.b" init(zeros) : tensor<5xf32>
  %y = tx.add %x, %b : tensor<2x3x5xf32>, tensor<5xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// An add of equal shapes passes the cotangent to both sides unchanged.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "add.x"
// CHECK:         %[[Y:.*]] = tx.param "add.y"
// CHECK:         %[[DZ:.*]] = tx.cross_entropy_grad
// CHECK:         tx.param_grad %[[DZ]] to %[[X]]
// CHECK-NOT:     tx.reduce_sum
// CHECK-NEXT:    tx.param_grad %[[DZ]] to %[[Y]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "add.x" init(normal) : tensor<2x3x5xf32>
  %y = tx.param "add.y" init(normal) : tensor<2x3x5xf32>
  %z = tx.add %x, %y : tensor<2x3x5xf32>, tensor<2x3x5xf32>
  %loss = tx.cross_entropy %z, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// x * s with a broadcast scale: dx = dy * s; ds = sum over [batch, seq] of dy * x.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "mul.x"
// CHECK:         %[[S:.*]] = tx.param "mul.s"
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK:         %[[DX:.*]] = tx.mul %[[DY]], %[[S]] : tensor<2x3x5xf32>, tensor<5xf32>
// CHECK:         tx.param_grad %[[DX]] to %[[X]]
// CHECK:         %[[DYX:.*]] = tx.mul %[[DY]], %[[X]] : tensor<2x3x5xf32>, tensor<2x3x5xf32>
// CHECK:         %[[DS:.*]] = tx.reduce_sum %[[DYX]] : tensor<2x3x5xf32> -> tensor<5xf32>
// CHECK:         tx.param_grad %[[DS]] to %[[S]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "mul.x" init(normal) : tensor<2x3x5xf32>
  %s = tx.param "mul.s" init(ones) : tensor<5xf32>
  %y = tx.mul %x, %s : tensor<2x3x5xf32>, tensor<5xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A reshape's cotangent is reshaped back to the input's shape.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "reshape.x"
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK:         %[[DX:.*]] = tx.reshape %[[DY]] : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
// CHECK:         tx.param_grad %[[DX]] to %[[X]] : tensor<2x3x2x2xf32>
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "reshape.x" init(normal) : tensor<2x3x2x2xf32>
  %y = tx.reshape %x : tensor<2x3x2x2xf32> -> tensor<2x3x4xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A slice's cotangent is padded back into place with zeros.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "slice.x"
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK:         %[[DX:.*]] = tx.pad %[[DY]] dim 2 offset 4 : tensor<2x3x4xf32> -> tensor<2x3x12xf32>
// CHECK:         tx.param_grad %[[DX]] to %[[X]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "slice.x" init(normal) : tensor<2x3x12xf32>
  %y = tx.slice %x dim 2 offset 4 : tensor<2x3x12xf32> -> tensor<2x3x4xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// An embedding table's gradient sums the cotangent rows by token id; the ids get none.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    %[[IDS:[^:]*]]: tensor<2x3xi32>
// CHECK:         %[[WTE:.*]] = tx.param "embedding.wte"
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK:         %[[DT:.*]] = tx.embedding_grad %[[DY]], %[[IDS]] : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<5x4xf32>
// CHECK:         tx.param_grad %[[DT]] to %[[WTE]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %wte = tx.param "embedding.wte" init(normal) : tensor<5x4xf32>
  %x = tx.embedding %wte[%ids] : tensor<5x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %loss = tx.cross_entropy %x, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "layer_norm.x"
// CHECK:         %[[W:.*]] = tx.param "layer_norm.w"
// CHECK:         %[[B:.*]] = tx.param "layer_norm.b"
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK:         %[[DX:.*]], %[[DW:.*]], %[[DB:.*]] = tx.layer_norm_grad %[[DY]], %[[X]], %[[W]] eps 1.000000e-05 : tensor<2x3x4xf32>, tensor<4xf32>
// CHECK:         tx.param_grad %[[DX]] to %[[X]]
// CHECK:         tx.param_grad %[[DW]] to %[[W]]
// CHECK:         tx.param_grad %[[DB]] to %[[B]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "layer_norm.x" init(normal) : tensor<2x3x4xf32>
  %w = tx.param "layer_norm.w" init(ones) : tensor<4xf32>
  %b = tx.param "layer_norm.b" init(zeros) : tensor<4xf32>
  %y = tx.layer_norm %x, %w, %b eps 1.0e-5 : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "rms_norm.x"
// CHECK:         %[[W:.*]] = tx.param "rms_norm.w"
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK:         %[[DX:.*]], %[[DW:.*]] = tx.rms_norm_grad %[[DY]], %[[X]], %[[W]] eps 9.9999999999999995E-7 : tensor<2x3x4xf32>, tensor<4xf32>
// CHECK:         tx.param_grad %[[DX]] to %[[X]]
// CHECK:         tx.param_grad %[[DW]] to %[[W]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "rms_norm.x" init(normal) : tensor<2x3x4xf32>
  %w = tx.param "rms_norm.w" init(ones) : tensor<4xf32>
  %y = tx.rms_norm %x, %w eps 1.0e-6 : tensor<2x3x4xf32>, tensor<4xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// gelu_grad reads the gelu's input and keeps its approximation.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "gelu.x"
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK:         %[[DX:.*]] = tx.gelu_grad %[[DY]], %[[X]] (erf) : tensor<2x3x4xf32>
// CHECK:         tx.param_grad %[[DX]] to %[[X]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "gelu.x" init(normal) : tensor<2x3x4xf32>
  %y = tx.gelu %x (erf) : tensor<2x3x4xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK:         %[[G:.*]] = tx.param "swiglu.gate"
// CHECK:         %[[U:.*]] = tx.param "swiglu.up"
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK:         %[[DG:.*]], %[[DU:.*]] = tx.swiglu_grad %[[DY]], %[[G]], %[[U]] : tensor<2x3x4xf32>
// CHECK:         tx.param_grad %[[DG]] to %[[G]]
// CHECK:         tx.param_grad %[[DU]] to %[[U]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %g = tx.param "swiglu.gate" init(normal) : tensor<2x3x4xf32>
  %u = tx.param "swiglu.up" init(normal) : tensor<2x3x4xf32>
  %y = tx.swiglu %g, %u : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Dropout's backward is dropout with the same rate and stream, so it draws the same mask.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "dropout.x"
// CHECK:         tx.dropout %[[X]] rate 1.000000e-01 stream 3
// CHECK:         %[[DY:.*]] = tx.cross_entropy_grad
// CHECK:         %[[DX:.*]] = tx.dropout %[[DY]] rate 1.000000e-01 stream 3 : tensor<2x3x4xf32>
// CHECK:         tx.param_grad %[[DX]] to %[[X]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "dropout.x" init(normal) : tensor<2x3x4xf32>
  %y = tx.dropout %x rate 0.1 stream 3 : tensor<2x3x4xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A rotation's VJP is the inverse rotation with the same theta.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "rope.x"
// CHECK:         tx.rope %[[X]] theta 1.000000e+04 :
// CHECK:         %[[DY:.*]] = tx.reshape %{{.*}} : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
// CHECK:         %[[DX:.*]] = tx.rope %[[DY]] theta 1.000000e+04 inverse : tensor<2x3x2x4xf32>
// CHECK:         tx.param_grad %[[DX]] to %[[X]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "rope.x" init(normal) : tensor<2x3x2x4xf32>
  %y = tx.rope %x theta 10000.0 : tensor<2x3x2x4xf32>
  %z = tx.reshape %y : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
  %loss = tx.cross_entropy %z, %labels : tensor<2x3x8xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// And the inverse rotation's VJP is the forward rotation.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "rope_inverse.x"
// CHECK:         tx.rope %[[X]] theta 5.000000e+02 inverse :
// CHECK:         %[[DY:.*]] = tx.reshape %{{.*}} : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
// CHECK:         %[[DX:.*]] = tx.rope %[[DY]] theta 5.000000e+02 : tensor<2x3x2x4xf32>
// CHECK:         tx.param_grad %[[DX]] to %[[X]]
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "rope_inverse.x" init(normal) : tensor<2x3x2x4xf32>
  %y = tx.rope %x theta 500.0 inverse : tensor<2x3x2x4xf32>
  %z = tx.reshape %y : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
  %loss = tx.cross_entropy %z, %labels : tensor<2x3x8xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Grouped-query attention: one attention_grad gives query, key and value cotangents in their
// own (grouped) shapes, with the forward's causal flag and scale.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[Q:.*]] = tx.param "attention.q"
// CHECK:         %[[K:.*]] = tx.param "attention.k"
// CHECK:         %[[V:.*]] = tx.param "attention.v"
// CHECK:         %[[DO:.*]] = tx.reshape %{{.*}} : tensor<2x3x8xf32> -> tensor<2x3x4x2xf32>
// CHECK:         %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = tx.attention_grad %[[DO]], %[[Q]], %[[K]], %[[V]] causal scale 5.000000e-01 : tensor<2x3x4x2xf32>, tensor<2x3x2x2xf32>
// CHECK:         tx.param_grad %[[DQ]] to %[[Q]] : tensor<2x3x4x2xf32>
// CHECK:         tx.param_grad %[[DK]] to %[[K]] : tensor<2x3x2x2xf32>
// CHECK:         tx.param_grad %[[DV]] to %[[V]] : tensor<2x3x2x2xf32>
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %q = tx.param "attention.q" init(normal) : tensor<2x3x4x2xf32>
  %k = tx.param "attention.k" init(normal) : tensor<2x3x2x2xf32>
  %v = tx.param "attention.v" init(normal) : tensor<2x3x2x2xf32>
  %a = tx.attention %q, %k, %v causal scale 0.5 : tensor<2x3x4x2xf32>, tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32> -> tensor<2x3x4x2xf32>
  %z = tx.reshape %a : tensor<2x3x4x2xf32> -> tensor<2x3x8xf32>
  %loss = tx.cross_entropy %z, %labels : tensor<2x3x8xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A tied embedding (input lookup and LM head) sums the cotangents of both uses.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[WTE:.*]] = tx.param "tied.wte"
// CHECK:         %[[DLOGITS:.*]] = tx.cross_entropy_grad
// CHECK:         %[[DX:.*]] = tx.matmul %[[DLOGITS]], %[[WTE]] :
// CHECK:         %[[HEAD:.*]] = tx.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<6x5xf32>, tensor<6x4xf32> -> tensor<5x4xf32>
// CHECK:         %[[LOOKUP:.*]] = tx.embedding_grad %[[DX]], %{{.*}} : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<5x4xf32>
// CHECK:         %[[SUM:.*]] = tx.add %[[HEAD]], %[[LOOKUP]] : tensor<5x4xf32>, tensor<5x4xf32>
// CHECK:         tx.param_grad %[[SUM]] to %[[WTE]]
// CHECK-NOT:     tx.param_grad
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %wte = tx.param "tied.wte" init(normal) : tensor<5x4xf32>
  %x = tx.embedding %wte[%ids] : tensor<5x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %logits = tx.matmul %x, %wte transpose_rhs : tensor<2x3x4xf32>, tensor<5x4xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A parameter the loss does not depend on gets no gradient at all.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[USED:.*]] = tx.param "unused.used"
// CHECK:         tx.param "unused.unused"
// CHECK:         tx.param_grad %{{.*}} to %[[USED]]
// CHECK-NOT:     tx.param_grad
// CHECK:         return
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %used = tx.param "unused.used" init(normal) : tensor<2x3x4xf32>
  %unused = tx.param "unused.unused" init(normal) : tensor<4xf32>
  %loss = tx.cross_entropy %used, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A layer function called twice is split once into @layer_forward (also returning what its
// backward needs) and @layer_backward; the entry calls each twice, backward calls in reverse order,
// and each layer's parameter gets its own gradient.
// CHECK-NOT:   func.func private @layer(
// CHECK-LABEL: func.func private @layer_forward(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
// CHECK:         %[[H:.*]] = tx.matmul %[[X]], %[[W]]
// CHECK:         %[[G:.*]] = tx.gelu %[[H]] (tanh)
// CHECK:         return %[[G]], %[[H]]
// CHECK-LABEL: func.func private @layer_backward(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<4x4xf32>, %[[H:.*]]: tensor<2x3x4xf32>, %[[DG:.*]]: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x4xf32>)
// CHECK:         %[[DH:.*]] = tx.gelu_grad %[[DG]], %[[H]] (tanh)
// CHECK:         %[[DX:.*]] = tx.matmul %[[DH]], %[[W]] transpose_rhs
// CHECK:         %[[DW:.*]] = tx.matmul %{{.*}}, %{{.*}} transpose_lhs
// CHECK:         return %[[DX]], %[[DW]]
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[X:.*]] = tx.param "layers.x"
// CHECK:         %[[W0:.*]] = tx.param "layers.0.w"
// CHECK:         %[[Y0:.*]]:2 = call @layer_forward(%[[X]], %[[W0]]) {megac.layer = @layer}
// CHECK:         %[[W1:.*]] = tx.param "layers.1.w"
// CHECK:         %[[Y1:.*]]:2 = call @layer_forward(%[[Y0]]#0, %[[W1]]) {megac.layer = @layer}
// CHECK:         %[[DY1:.*]] = tx.cross_entropy_grad %{{.*}}, %[[Y1]]#0
// CHECK:         %[[B1:.*]]:2 = call @layer_backward(%[[Y0]]#0, %[[W1]], %[[Y1]]#1, %[[DY1]])
// CHECK:         tx.param_grad %[[B1]]#1 to %[[W1]]
// CHECK:         %[[B0:.*]]:2 = call @layer_backward(%[[X]], %[[W0]], %[[Y0]]#1, %[[B1]]#0)
// CHECK:         tx.param_grad %[[B0]]#0 to %[[X]]
// CHECK:         tx.param_grad %[[B0]]#1 to %[[W0]]
// CHECK-NOT:   call @layer(
func.func private @layer(%x: tensor<2x3x4xf32>, %w: tensor<4x4xf32>) -> tensor<2x3x4xf32> {
  %h = tx.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>
  %g = tx.gelu %h (tanh) : tensor<2x3x4xf32>
  return %g : tensor<2x3x4xf32>
}
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "layers.x" init(normal) : tensor<2x3x4xf32>
  %w0 = tx.param "layers.0.w" init(normal) : tensor<4x4xf32>
  %y0 = func.call @layer(%x, %w0) : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %w1 = tx.param "layers.1.w" init(normal) : tensor<4x4xf32>
  %y1 = func.call @layer(%y0, %w1) : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %loss = tx.cross_entropy %y1, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A layer result the loss does not use gets a zero cotangent in the backward call.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[Y:.*]]:2 = call @two_results_forward
// CHECK:         %[[DA:.*]] = tx.cross_entropy_grad %{{.*}}, %[[Y]]#0
// CHECK:         %[[ZERO:.*]] = tx.zeros : tensor<2x3x4xf32>
// CHECK:         call @two_results_backward(%{{.*}}, %[[DA]], %[[ZERO]])
func.func private @two_results(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %a = tx.gelu %x (tanh) : tensor<2x3x4xf32>
  %b = tx.gelu %x (erf) : tensor<2x3x4xf32>
  return %a, %b : tensor<2x3x4xf32>, tensor<2x3x4xf32>
}
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "two_results.x" init(normal) : tensor<2x3x4xf32>
  %y:2 = func.call @two_results(%x) : (tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
  %loss = tx.cross_entropy %y#0, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
