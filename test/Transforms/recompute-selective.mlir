// RUN: megac-opt %s --megac-recompute -split-input-file | FileCheck %s
// Selective recomputation (recompute_granularity = "selective") on a small layer as
// megac-autodiff splits it: @layer_forward returns its output, then the activations it saves
// (megac.saved_from); @layer_backward takes the forward arguments it reads (megac.forward_args),
// the saved activations and the output's cotangent. The recomputed activations are no longer
// returned; @layer_backward reruns the forward ops that make them (marked megac.recomputed)
// just before their first use, from forward arguments and the activations still saved.

// mlp: the MLP's saved activations (GELU's input fc and output act) are recomputed from the
// norm's output ln, still saved; fc's bias, which the backward did not read, becomes a forward
// argument of it (3 joins megac.forward_args). Both layers' calls follow the new signatures
// (the two layers share their weights to keep the IR short).
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, recompute_granularity = "selective", recompute_modules = ["mlp"]>}
// CHECK-LABEL: func.func private @layer_forward
// CHECK-SAME:    -> (tensor<4x8xf32>, tensor<4x8xf32>) attributes {megac.role = #megac.role<layer_forward>, megac.saved_from = 1 : i64}
// CHECK:         %[[LN:.*]] = tx.rms_norm
// CHECK:         %[[Y:.*]] = tx.add %arg0,
// CHECK-NEXT:    return %[[Y]], %[[LN]] :
// CHECK-LABEL: func.func private @layer_backward
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[W1:.*]]: tensor<8x16xf32>, %[[B1:.*]]: tensor<16xf32>, %[[W2:.*]]: tensor<16x8xf32>, %[[SLN:.*]]: tensor<4x8xf32>, %[[DY:.*]]: tensor<4x8xf32>)
// CHECK-SAME:    attributes {megac.forward_args = array<i64: 0, 1, 2, 3, 4>, megac.recomputed = ["act", "fc"], megac.role = #megac.role<layer_backward>}
// CHECK-NEXT:    %[[DACT:.*]] = tx.matmul %[[DY]], %[[W2]] transpose_rhs
// CHECK-NEXT:    %[[FCG:.*]] = tx.matmul %[[SLN]], %[[W1]] {megac.recomputed}
// CHECK-NEXT:    %[[FC:.*]] = tx.add %[[FCG]], %[[B1]] {megac.recomputed}
// CHECK-NEXT:    %[[ACT:.*]] = tx.gelu %[[FC]] (tanh) {megac.recomputed}
// CHECK-NEXT:    tx.matmul %[[ACT]], %[[DY]] transpose_lhs
// CHECK-NEXT:    tx.gelu_grad %[[DACT]], %[[FC]]
// CHECK-NOT:     megac.recomputed}
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[B:.*]] = tx.param "h.0.b1"
// CHECK:         %[[L0:[0-9]+]]:2 = call @layer_forward({{.*}}) {megac.layer = @layer, megac.layer_index = 0 : i64} {{.*}} -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT:    %[[L1:[0-9]+]]:2 = call @layer_forward(%[[L0]]#0, {{.*}}) {megac.layer = @layer, megac.layer_index = 1 : i64}
// CHECK:         %[[D1:[0-9]+]]:5 = call @layer_backward(%[[L0]]#0, %{{.*}}, %{{.*}}, %[[B]], %{{.*}}, %[[L1]]#1, %{{.*}}) {megac.layer_index = 1 : i64}
// CHECK-NEXT:    call @layer_backward(%{{.*}}, %{{.*}}, %{{.*}}, %[[B]], %{{.*}}, %[[L0]]#1, %[[D1]]#0) {megac.layer_index = 0 : i64}
func.func private @layer_forward(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %w1: tensor<8x16xf32>, %b1: tensor<16xf32>, %w2: tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>) attributes {megac.role = #megac.role<layer_forward>, megac.saved_from = 1 : i64} {
  %ln = tx.rms_norm %x, %g eps 1.0e-05 : tensor<4x8xf32>, tensor<8xf32> loc("ln")
  %fc_gemm = tx.matmul %ln, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %fc = tx.add %fc_gemm, %b1 : tensor<4x16xf32>, tensor<16xf32> loc("fc")
  %act = tx.gelu %fc (tanh) : tensor<4x16xf32> loc("act")
  %proj = tx.matmul %act, %w2 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %y = tx.add %x, %proj : tensor<4x8xf32>, tensor<4x8xf32>
  return %y, %act, %fc, %ln : tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>
}
func.func private @layer_backward(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<16x8xf32>, %act: tensor<4x16xf32>, %fc: tensor<4x16xf32>, %ln: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>) attributes {megac.role = #megac.role<layer_backward>, megac.forward_args = array<i64: 0, 1, 2, 4>} {
  %dact = tx.matmul %dy, %w2 transpose_rhs : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %dw2 = tx.matmul %act, %dy transpose_lhs : tensor<4x16xf32>, tensor<4x8xf32> -> tensor<16x8xf32>
  %dfc = tx.gelu_grad %dact, %fc (tanh) : tensor<4x16xf32>
  %db1 = tx.reduce_sum %dfc : tensor<4x16xf32> -> tensor<16xf32>
  %dln = tx.matmul %dfc, %w1 transpose_rhs : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
  %dw1 = tx.matmul %ln, %dfc transpose_lhs : tensor<4x8xf32>, tensor<4x16xf32> -> tensor<8x16xf32>
  %dx_ln, %dg = tx.rms_norm_grad %dln, %x, %g eps 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>
  %dx = tx.add %dy, %dx_ln : tensor<4x8xf32>, tensor<4x8xf32>
  return %dx, %dg, %dw1, %db1, %dw2 : tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>
}
func.func @train_step(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  %g = tx.param "h.0.g" init(ones) : tensor<8xf32>
  %w1 = tx.param "h.0.w1" init(normal) : tensor<8x16xf32>
  %b1 = tx.param "h.0.b1" init(zeros) : tensor<16xf32>
  %w2 = tx.param "h.0.w2" init(normal) : tensor<16x8xf32>
  %l0:4 = call @layer_forward(%e, %g, %w1, %b1, %w2) {megac.layer = @layer, megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>)
  %l1:4 = call @layer_forward(%l0#0, %g, %w1, %b1, %w2) {megac.layer = @layer, megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>)
  %loss = tx.cross_entropy %l1#0, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  %d = tx.cross_entropy_grad %dloss, %l1#0, %labels : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %d1:5 = call @layer_backward(%l0#0, %g, %w1, %w2, %l1#1, %l1#2, %l1#3, %d) {megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>)
  %d0:5 = call @layer_backward(%e, %g, %w1, %w2, %l0#1, %l0#2, %l0#3, %d1#0) {megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>)
  %dg = tx.add %d1#1, %d0#1 : tensor<8xf32>, tensor<8xf32>
  tx.param_grad %dg to %g : tensor<8xf32>
  %dw1 = tx.add %d1#2, %d0#2 : tensor<8x16xf32>, tensor<8x16xf32>
  tx.param_grad %dw1 to %w1 : tensor<8x16xf32>
  %db1 = tx.add %d1#3, %d0#3 : tensor<16xf32>, tensor<16xf32>
  tx.param_grad %db1 to %b1 : tensor<16xf32>
  %dw2 = tx.add %d1#4, %d0#4 : tensor<16x8xf32>, tensor<16x8xf32>
  tx.param_grad %dw2 to %w2 : tensor<16x8xf32>
  %de = tx.embedding_grad %d0#0, %ids : tensor<4x8xf32>, tensor<4xi32> -> tensor<8x8xf32>
  tx.param_grad %de to %wte : tensor<8x8xf32>
  return %loss : tensor<f32>
}

// -----

// layernorm: the norm's output is recomputed from the forward arguments, just before the
// weight gradient that reads it; the MLP's activations stay saved.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, recompute_granularity = "selective", recompute_modules = ["layernorm"]>}
// CHECK-LABEL: func.func private @layer_forward
// CHECK:         return %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>
// CHECK-LABEL: func.func private @layer_backward
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[G:.*]]: tensor<8xf32>, %{{.*}}: tensor<8x16xf32>, %{{.*}}: tensor<16x8xf32>, %{{.*}}: tensor<4x16xf32>, %{{.*}}: tensor<4x16xf32>, %{{.*}}: tensor<4x8xf32>)
// CHECK-SAME:    attributes {megac.forward_args = array<i64: 0, 1, 2, 4>, megac.recomputed = ["ln"], megac.role = #megac.role<layer_backward>}
// CHECK:         %[[DFC:.*]] = tx.gelu_grad
// CHECK-NEXT:    tx.reduce_sum
// CHECK-NEXT:    tx.matmul %[[DFC]], %{{.*}} transpose_rhs
// CHECK-NEXT:    %[[LN:.*]] = tx.rms_norm %[[X]], %[[G]] eps 1.000000e-05 {megac.recomputed}
// CHECK-NEXT:    tx.matmul %[[LN]], %[[DFC]] transpose_lhs
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[L:[0-9]+]]:3 = call @layer_forward
// CHECK:         call @layer_backward(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[L]]#1, %[[L]]#2, %{{.*}})
func.func private @layer_forward(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %w1: tensor<8x16xf32>, %b1: tensor<16xf32>, %w2: tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>) attributes {megac.role = #megac.role<layer_forward>, megac.saved_from = 1 : i64} {
  %ln = tx.rms_norm %x, %g eps 1.0e-05 : tensor<4x8xf32>, tensor<8xf32> loc("ln")
  %fc_gemm = tx.matmul %ln, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %fc = tx.add %fc_gemm, %b1 : tensor<4x16xf32>, tensor<16xf32> loc("fc")
  %act = tx.gelu %fc (tanh) : tensor<4x16xf32> loc("act")
  %proj = tx.matmul %act, %w2 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %y = tx.add %x, %proj : tensor<4x8xf32>, tensor<4x8xf32>
  return %y, %act, %fc, %ln : tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>
}
func.func private @layer_backward(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<16x8xf32>, %act: tensor<4x16xf32>, %fc: tensor<4x16xf32>, %ln: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>) attributes {megac.role = #megac.role<layer_backward>, megac.forward_args = array<i64: 0, 1, 2, 4>} {
  %dact = tx.matmul %dy, %w2 transpose_rhs : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %dw2 = tx.matmul %act, %dy transpose_lhs : tensor<4x16xf32>, tensor<4x8xf32> -> tensor<16x8xf32>
  %dfc = tx.gelu_grad %dact, %fc (tanh) : tensor<4x16xf32>
  %db1 = tx.reduce_sum %dfc : tensor<4x16xf32> -> tensor<16xf32>
  %dln = tx.matmul %dfc, %w1 transpose_rhs : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
  %dw1 = tx.matmul %ln, %dfc transpose_lhs : tensor<4x8xf32>, tensor<4x16xf32> -> tensor<8x16xf32>
  %dx_ln, %dg = tx.rms_norm_grad %dln, %x, %g eps 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>
  %dx = tx.add %dy, %dx_ln : tensor<4x8xf32>, tensor<4x8xf32>
  return %dx, %dg, %dw1, %db1, %dw2 : tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>
}
func.func @train_step(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  %g = tx.param "h.0.g" init(ones) : tensor<8xf32>
  %w1 = tx.param "h.0.w1" init(normal) : tensor<8x16xf32>
  %b1 = tx.param "h.0.b1" init(zeros) : tensor<16xf32>
  %w2 = tx.param "h.0.w2" init(normal) : tensor<16x8xf32>
  %l:4 = call @layer_forward(%e, %g, %w1, %b1, %w2) {megac.layer = @layer, megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>)
  %loss = tx.cross_entropy %l#0, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  %d = tx.cross_entropy_grad %dloss, %l#0, %labels : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %b:5 = call @layer_backward(%e, %g, %w1, %w2, %l#1, %l#2, %l#3, %d) {megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>)
  tx.param_grad %b#1 to %g : tensor<8xf32>
  tx.param_grad %b#2 to %w1 : tensor<8x16xf32>
  tx.param_grad %b#3 to %b1 : tensor<16xf32>
  tx.param_grad %b#4 to %w2 : tensor<16x8xf32>
  %de = tx.embedding_grad %b#0, %ids : tensor<4x8xf32>, tensor<4xi32> -> tensor<8x8xf32>
  tx.param_grad %de to %wte : tensor<8x8xf32>
  return %loss : tensor<f32>
}

// -----

// core_attn alone: megac's attention keeps no s x s term, so nothing is recomputed; the
// backward only records that (an empty megac.recomputed).
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, recompute_granularity = "selective", recompute_modules = ["core_attn"]>}
// CHECK-LABEL: func.func private @layer_forward
// CHECK-SAME:    -> (tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>)
// CHECK-LABEL: func.func private @layer_backward
// CHECK-SAME:    attributes {megac.forward_args = array<i64: 0, 1, 2, 4>, megac.recomputed = [], megac.role = #megac.role<layer_backward>}
// CHECK-NOT:     {megac.recomputed}
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[L:[0-9]+]]:4 = call @layer_forward
// CHECK:         call @layer_backward(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[L]]#1, %[[L]]#2, %[[L]]#3, %{{.*}})
func.func private @layer_forward(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %w1: tensor<8x16xf32>, %b1: tensor<16xf32>, %w2: tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>) attributes {megac.role = #megac.role<layer_forward>, megac.saved_from = 1 : i64} {
  %ln = tx.rms_norm %x, %g eps 1.0e-05 : tensor<4x8xf32>, tensor<8xf32> loc("ln")
  %fc_gemm = tx.matmul %ln, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %fc = tx.add %fc_gemm, %b1 : tensor<4x16xf32>, tensor<16xf32> loc("fc")
  %act = tx.gelu %fc (tanh) : tensor<4x16xf32> loc("act")
  %proj = tx.matmul %act, %w2 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %y = tx.add %x, %proj : tensor<4x8xf32>, tensor<4x8xf32>
  return %y, %act, %fc, %ln : tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>
}
func.func private @layer_backward(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<16x8xf32>, %act: tensor<4x16xf32>, %fc: tensor<4x16xf32>, %ln: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>) attributes {megac.role = #megac.role<layer_backward>, megac.forward_args = array<i64: 0, 1, 2, 4>} {
  %dact = tx.matmul %dy, %w2 transpose_rhs : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %dw2 = tx.matmul %act, %dy transpose_lhs : tensor<4x16xf32>, tensor<4x8xf32> -> tensor<16x8xf32>
  %dfc = tx.gelu_grad %dact, %fc (tanh) : tensor<4x16xf32>
  %db1 = tx.reduce_sum %dfc : tensor<4x16xf32> -> tensor<16xf32>
  %dln = tx.matmul %dfc, %w1 transpose_rhs : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
  %dw1 = tx.matmul %ln, %dfc transpose_lhs : tensor<4x8xf32>, tensor<4x16xf32> -> tensor<8x16xf32>
  %dx_ln, %dg = tx.rms_norm_grad %dln, %x, %g eps 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>
  %dx = tx.add %dy, %dx_ln : tensor<4x8xf32>, tensor<4x8xf32>
  return %dx, %dg, %dw1, %db1, %dw2 : tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>
}
func.func @train_step(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  %g = tx.param "h.0.g" init(ones) : tensor<8xf32>
  %w1 = tx.param "h.0.w1" init(normal) : tensor<8x16xf32>
  %b1 = tx.param "h.0.b1" init(zeros) : tensor<16xf32>
  %w2 = tx.param "h.0.w2" init(normal) : tensor<16x8xf32>
  %l:4 = call @layer_forward(%e, %g, %w1, %b1, %w2) {megac.layer = @layer, megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>)
  %loss = tx.cross_entropy %l#0, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  %d = tx.cross_entropy_grad %dloss, %l#0, %labels : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %b:5 = call @layer_backward(%e, %g, %w1, %w2, %l#1, %l#2, %l#3, %d) {megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>)
  tx.param_grad %b#1 to %g : tensor<8xf32>
  tx.param_grad %b#2 to %w1 : tensor<8x16xf32>
  tx.param_grad %b#3 to %b1 : tensor<16xf32>
  tx.param_grad %b#4 to %w2 : tensor<16x8xf32>
  %de = tx.embedding_grad %b#0, %ids : tensor<4x8xf32>, tensor<4xi32> -> tensor<8x8xf32>
  tx.param_grad %de to %wte : tensor<8x8xf32>
  return %loss : tensor<f32>
}
