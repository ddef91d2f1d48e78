// RUN: megac-opt %s --megac-autocast -split-input-file | FileCheck %s
// megac-autocast on small hand-written forwards (the frontend's @forward, before megac-autodiff):
// with the plan's activation_precision, what is computed from the data (the embedding's output
// and everything reading a 16-bit value) becomes 16-bit; the parameters, what is computed from
// them alone, the ids and the loss stay as they are.

// bf16: the embedding's output and everything after it, through the layer, is bf16; the
// parameters (the tied head's weight too) and the loss stay fp32. The layer function takes the
// types of its calls (both the same, so one signature); a weight-only op inside it stays fp32.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, activation_precision = "bf16">}
// CHECK-LABEL: func.func private @layer
// CHECK-SAME:    (%{{.*}}: tensor<1x4x8xbf16>, %{{.*}}: tensor<8x8xf32>, %{{.*}}: tensor<8xf32>) -> tensor<1x4x8xbf16>
// CHECK-NEXT:    tx.layer_norm {{.*}} : tensor<1x4x8xbf16>, tensor<8xf32>, tensor<8xf32>
// CHECK-NEXT:    tx.add {{.*}} : tensor<8x8xf32>, tensor<8x8xf32>
// CHECK-NEXT:    tx.matmul {{.*}} : tensor<1x4x8xbf16>, tensor<8x8xf32> -> tensor<1x4x8xbf16>
// CHECK-NEXT:    tx.add {{.*}} : tensor<1x4x8xbf16>, tensor<8xf32>
// CHECK-NEXT:    return {{.*}} : tensor<1x4x8xbf16>
func.func private @layer(%x: tensor<1x4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<1x4x8xf32> {
  %h = tx.layer_norm %x, %b, %b eps 1.0e-05 : tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %w2 = tx.add %w, %w : tensor<8x8xf32>, tensor<8x8xf32>
  %y = tx.matmul %h, %w2 : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %z = tx.add %y, %b : tensor<1x4x8xf32>, tensor<8xf32>
  return %z : tensor<1x4x8xf32>
}
// CHECK-LABEL: func.func @forward
// CHECK-SAME:    (%{{.*}}: tensor<1x4xi32>, %{{.*}}: tensor<1x4xi32>) -> tensor<f32>
// CHECK-NEXT:    tx.param "wte" {{.*}} : tensor<16x8xf32>
// CHECK-NEXT:    tx.embedding {{.*}} : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xbf16>
// CHECK-NEXT:    tx.param "wpe" {{.*}} : tensor<4x8xf32>
// CHECK-NEXT:    tx.add {{.*}} : tensor<1x4x8xbf16>, tensor<4x8xf32>
// CHECK-NEXT:    tx.param "h.0.w" {{.*}} : tensor<8x8xf32>
// CHECK-NEXT:    tx.param "h.0.b" {{.*}} : tensor<8xf32>
// CHECK-NEXT:    call @layer({{.*}}) {{.*}} : (tensor<1x4x8xbf16>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<1x4x8xbf16>
// CHECK-NEXT:    call @layer({{.*}}) {{.*}} : (tensor<1x4x8xbf16>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<1x4x8xbf16>
// CHECK-NEXT:    tx.matmul {{.*}} transpose_rhs : tensor<1x4x8xbf16>, tensor<16x8xf32> -> tensor<1x4x16xbf16>
// CHECK-NEXT:    tx.cross_entropy {{.*}} : tensor<1x4x16xbf16>, tensor<1x4xi32> -> tensor<f32>
// CHECK-NEXT:    return {{.*}} : tensor<f32>
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %tok = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %wpe = tx.param "wpe" init(normal) : tensor<4x8xf32>
  %e = tx.add %tok, %wpe : tensor<1x4x8xf32>, tensor<4x8xf32>
  %w = tx.param "h.0.w" init(normal) : tensor<8x8xf32>
  %b = tx.param "h.0.b" init(zeros) : tensor<8xf32>
  %l0 = call @layer(%e, %w, %b) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %l1 = call @layer(%l0, %w, %b) {megac.layer_index = 1 : i64} : (tensor<1x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l1, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// fp16: the same rule with f16; a function called from a layer function is retyped from its
// call too (here with a 16-bit argument).
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, activation_precision = "fp16">}
// CHECK-LABEL: func.func private @inner
// CHECK-SAME:    (%{{.*}}: tensor<1x4x8xf16>) -> tensor<1x4x8xf16>
// CHECK-NEXT:    tx.gelu {{.*}} : tensor<1x4x8xf16>
func.func private @inner(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %g = tx.gelu %x (tanh) : tensor<1x4x8xf32>
  return %g : tensor<1x4x8xf32>
}
// CHECK-LABEL: func.func private @layer
// CHECK-SAME:    (%{{.*}}: tensor<1x4x8xf16>) -> tensor<1x4x8xf16>
// CHECK-NEXT:    call @inner({{.*}}) : (tensor<1x4x8xf16>) -> tensor<1x4x8xf16>
func.func private @layer(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %y = call @inner(%x) : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}
// CHECK-LABEL: func.func @forward
// CHECK:         tx.embedding {{.*}} -> tensor<1x4x8xf16>
// CHECK-NEXT:    call @layer({{.*}}) {{.*}} : (tensor<1x4x8xf16>) -> tensor<1x4x8xf16>
// CHECK-NEXT:    tx.matmul {{.*}} -> tensor<1x4x16xf16>
// CHECK-NEXT:    tx.cross_entropy {{.*}} -> tensor<f32>
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %l0 = call @layer(%e) {megac.layer_index = 0 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l0, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// No activation_precision (fp32, as the frontend records it): nothing changes.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, sequence_parallel = false>}
// CHECK-LABEL: func.func @forward
// CHECK-NOT:     f16
// CHECK:         tx.embedding {{.*}} -> tensor<1x4x8xf32>
// CHECK-NOT:     f16
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %logits = tx.matmul %e, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// activation_precision = "fp32" spelled out: nothing changes either.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, activation_precision = "fp32">}
// CHECK-LABEL: func.func @forward
// CHECK-NOT:     f16
// CHECK:         tx.embedding {{.*}} -> tensor<1x4x8xf32>
// CHECK-NOT:     f16
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %logits = tx.matmul %e, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
