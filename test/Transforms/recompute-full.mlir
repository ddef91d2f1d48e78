// RUN: megac-opt %s --megac-recompute -split-input-file | FileCheck %s
// Full recomputation (recompute_granularity = "full") on three layers as megac-autodiff splits
// them: @layer_forward returns the layer's output, then what its backward saves (here the GELU's
// input). A recomputed layer's forward calls @layer_forward_only (no saved activations); just
// before the backward of a group's last layer, @layer_forward reruns for each layer of the group
// (megac.recompute = its index) from the group's input, and the backward calls read the reruns.

// uniform, 2 layers a group: groups [0, 1] and [2]. Layer 1 reruns from layer 0's rerun, not
// from the forward. distribute_saved_activations (tp 2): each group's first rerun says so.
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2, recompute_granularity = "full", recompute_method = "uniform", recompute_num_layers = 2, distribute_saved_activations = true>}
// CHECK-LABEL: func.func private @layer_forward_only
// CHECK-SAME:    -> tensor<4x8xf32>
// CHECK-NEXT:    tx.matmul
// CHECK-NEXT:    %[[Y:.*]] = tx.gelu
// CHECK-NEXT:    return %[[Y]] : tensor<4x8xf32>
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[E:.*]] = tx.embedding
// CHECK-NEXT:    %[[W0:.*]] = tx.param "h.0.w"
// CHECK-NEXT:    %[[F0:.*]] = call @layer_forward_only(%[[E]], %[[W0]]) {megac.layer = @layer, megac.layer_index = 0 : i64}
// CHECK-NEXT:    %[[W1:.*]] = tx.param "h.1.w"
// CHECK-NEXT:    %[[F1:.*]] = call @layer_forward_only(%[[F0]], %[[W1]]) {megac.layer = @layer, megac.layer_index = 1 : i64}
// CHECK-NEXT:    %[[W2:.*]] = tx.param "h.2.w"
// CHECK-NEXT:    %[[F2:.*]] = call @layer_forward_only(%[[F1]], %[[W2]]) {megac.layer = @layer, megac.layer_index = 2 : i64}
// CHECK-NEXT:    tx.cross_entropy %[[F2]]
// CHECK-NEXT:    %[[D:.*]] = tx.cross_entropy_grad
// CHECK-NEXT:    %[[R2:[0-9]+]]:2 = call @layer_forward(%[[F1]], %[[W2]]) {megac.distribute_saved, megac.layer_index = 2 : i64, megac.recompute = 2 : i64}
// CHECK-NEXT:    %[[B2:[0-9]+]]:2 = call @layer_backward(%[[F1]], %[[W2]], %[[R2]]#1, %[[D]])
// CHECK-NEXT:    tx.param_grad
// CHECK-NEXT:    %[[R0:[0-9]+]]:2 = call @layer_forward(%[[E]], %[[W0]]) {megac.distribute_saved, megac.layer_index = 0 : i64, megac.recompute = 0 : i64}
// CHECK-NEXT:    %[[R1:[0-9]+]]:2 = call @layer_forward(%[[R0]]#0, %[[W1]]) {megac.layer_index = 1 : i64, megac.recompute = 1 : i64}
// CHECK-NEXT:    %[[B1:[0-9]+]]:2 = call @layer_backward(%[[R0]]#0, %[[W1]], %[[R1]]#1, %[[B2]]#0)
// CHECK-NEXT:    tx.param_grad
// CHECK-NEXT:    call @layer_backward(%[[E]], %[[W0]], %[[R0]]#1, %[[B1]]#0)
func.func private @layer_forward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) attributes {megac.role = #megac.role<layer_forward>, megac.saved_from = 1 : i64} {
  %h = tx.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %y = tx.gelu %h (tanh) : tensor<4x8xf32>
  return %y, %h : tensor<4x8xf32>, tensor<4x8xf32>
}
func.func private @layer_backward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %h: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>) attributes {megac.role = #megac.role<layer_backward>, megac.forward_args = array<i64: 0, 1>} {
  %dh = tx.gelu_grad %dy, %h (tanh) : tensor<4x8xf32>
  %dx = tx.matmul %dh, %w transpose_rhs : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %dw = tx.matmul %x, %dh transpose_lhs : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  return %dx, %dw : tensor<4x8xf32>, tensor<8x8xf32>
}
func.func @train_step(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  %w0 = tx.param "h.0.w" init(normal) : tensor<8x8xf32>
  %l0:2 = call @layer_forward(%e, %w0) {megac.layer = @layer, megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %w1 = tx.param "h.1.w" init(normal) : tensor<8x8xf32>
  %l1:2 = call @layer_forward(%l0#0, %w1) {megac.layer = @layer, megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %w2 = tx.param "h.2.w" init(normal) : tensor<8x8xf32>
  %l2:2 = call @layer_forward(%l1#0, %w2) {megac.layer = @layer, megac.layer_index = 2 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %loss = tx.cross_entropy %l2#0, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  %d = tx.cross_entropy_grad %dloss, %l2#0, %labels : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %b2:2 = call @layer_backward(%l1#0, %w2, %l2#1, %d) {megac.layer_index = 2 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  tx.param_grad %b2#1 to %w2 : tensor<8x8xf32>
  %b1:2 = call @layer_backward(%l0#0, %w1, %l1#1, %b2#0) {megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  tx.param_grad %b1#1 to %w1 : tensor<8x8xf32>
  %b0:2 = call @layer_backward(%e, %w0, %l0#1, %b1#0) {megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  tx.param_grad %b0#1 to %w0 : tensor<8x8xf32>
  %de = tx.embedding_grad %b0#0, %ids : tensor<4x8xf32>, tensor<4xi32> -> tensor<8x8xf32>
  tx.param_grad %de to %wte : tensor<8x8xf32>
  return %loss : tensor<f32>
}

// -----

// Groups never cross a pipeline chunk: with pipeline_layout [1, 2] the same uniform 2 makes
// groups [0] and [1, 2]. Without distribute_saved_activations no rerun carries it.
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_layout = [1, 2], pipeline_schedule = "1f1b", recompute_granularity = "full", recompute_method = "uniform", recompute_num_layers = 2, distribute_saved_activations = false>}
// CHECK-LABEL: func.func @train_step
// CHECK-NOT:     megac.distribute_saved
// CHECK:         %[[F0:[0-9]+]] = call @layer_forward_only(%[[E:[0-9]+]], %[[W0:[0-9]+]]) {{.*}}megac.layer_index = 0
// CHECK:         %[[F1:[0-9]+]] = call @layer_forward_only(%[[F0]], %[[W1:[0-9]+]]) {{.*}}megac.layer_index = 1
// CHECK:         call @layer_forward_only(%[[F1]], %[[W2:[0-9]+]]) {{.*}}megac.layer_index = 2
// CHECK:         %[[R1:[0-9]+]]:2 = call @layer_forward(%[[F0]], %[[W1]]) {megac.layer_index = 1 : i64, megac.recompute = 1 : i64}
// CHECK-NEXT:    %[[R2:[0-9]+]]:2 = call @layer_forward(%[[R1]]#0, %[[W2]]) {megac.layer_index = 2 : i64, megac.recompute = 2 : i64}
// CHECK-NEXT:    call @layer_backward(%[[R1]]#0, %[[W2]], %[[R2]]#1,
// CHECK-NEXT:    tx.param_grad
// CHECK-NEXT:    call @layer_backward(%[[F0]], %[[W1]], %[[R1]]#1,
// CHECK-NEXT:    tx.param_grad
// CHECK-NEXT:    %[[R0:[0-9]+]]:2 = call @layer_forward(%[[E]], %[[W0]]) {megac.layer_index = 0 : i64, megac.recompute = 0 : i64}
// CHECK-NEXT:    call @layer_backward(%[[E]], %[[W0]], %[[R0]]#1,
// CHECK-NOT:     megac.distribute_saved
func.func private @layer_forward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) attributes {megac.role = #megac.role<layer_forward>, megac.saved_from = 1 : i64} {
  %h = tx.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %y = tx.gelu %h (tanh) : tensor<4x8xf32>
  return %y, %h : tensor<4x8xf32>, tensor<4x8xf32>
}
func.func private @layer_backward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %h: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>) attributes {megac.role = #megac.role<layer_backward>, megac.forward_args = array<i64: 0, 1>} {
  %dh = tx.gelu_grad %dy, %h (tanh) : tensor<4x8xf32>
  %dx = tx.matmul %dh, %w transpose_rhs : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %dw = tx.matmul %x, %dh transpose_lhs : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  return %dx, %dw : tensor<4x8xf32>, tensor<8x8xf32>
}
func.func @train_step(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  %w0 = tx.param "h.0.w" init(normal) : tensor<8x8xf32>
  %l0:2 = call @layer_forward(%e, %w0) {megac.layer = @layer, megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %w1 = tx.param "h.1.w" init(normal) : tensor<8x8xf32>
  %l1:2 = call @layer_forward(%l0#0, %w1) {megac.layer = @layer, megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %w2 = tx.param "h.2.w" init(normal) : tensor<8x8xf32>
  %l2:2 = call @layer_forward(%l1#0, %w2) {megac.layer = @layer, megac.layer_index = 2 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %loss = tx.cross_entropy %l2#0, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  %d = tx.cross_entropy_grad %dloss, %l2#0, %labels : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %b2:2 = call @layer_backward(%l1#0, %w2, %l2#1, %d) {megac.layer_index = 2 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  tx.param_grad %b2#1 to %w2 : tensor<8x8xf32>
  %b1:2 = call @layer_backward(%l0#0, %w1, %l1#1, %b2#0) {megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  tx.param_grad %b1#1 to %w1 : tensor<8x8xf32>
  %b0:2 = call @layer_backward(%e, %w0, %l0#1, %b1#0) {megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  tx.param_grad %b0#1 to %w0 : tensor<8x8xf32>
  %de = tx.embedding_grad %b0#0, %ids : tensor<4x8xf32>, tensor<4xi32> -> tensor<8x8xf32>
  tx.param_grad %de to %wte : tensor<8x8xf32>
  return %loss : tensor<f32>
}

// -----

// block, 1 layer: the first layer of each chunk (0 and 1) is recomputed; layer 2 is left alone,
// its forward still saving for its backward.
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_layout = [1, 2], pipeline_schedule = "1f1b", recompute_granularity = "full", recompute_method = "block", recompute_num_layers = 1, distribute_saved_activations = false>}
// CHECK-LABEL: func.func @train_step
// CHECK:         call @layer_forward_only({{.*}}megac.layer_index = 0
// CHECK:         call @layer_forward_only({{.*}}megac.layer_index = 1
// CHECK:         %[[L2:[0-9]+]]:2 = call @layer_forward({{.*}}) {megac.layer = @layer, megac.layer_index = 2 : i64}
// CHECK:         call @layer_backward(%{{.*}}, %{{.*}}, %[[L2]]#1, %{{.*}}) {megac.layer_index = 2 : i64}
// CHECK-NEXT:    tx.param_grad
// CHECK-NEXT:    %[[R1:[0-9]+]]:2 = call @layer_forward({{.*}}) {megac.layer_index = 1 : i64, megac.recompute = 1 : i64}
// CHECK-NEXT:    call @layer_backward(%{{.*}}, %{{.*}}, %[[R1]]#1, %{{.*}}) {megac.layer_index = 1 : i64}
// CHECK-NEXT:    tx.param_grad
// CHECK-NEXT:    %[[R0:[0-9]+]]:2 = call @layer_forward({{.*}}) {megac.layer_index = 0 : i64, megac.recompute = 0 : i64}
// CHECK-NEXT:    call @layer_backward(%{{.*}}, %{{.*}}, %[[R0]]#1, %{{.*}}) {megac.layer_index = 0 : i64}
// CHECK-NOT:     megac.recompute =
func.func private @layer_forward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) attributes {megac.role = #megac.role<layer_forward>, megac.saved_from = 1 : i64} {
  %h = tx.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %y = tx.gelu %h (tanh) : tensor<4x8xf32>
  return %y, %h : tensor<4x8xf32>, tensor<4x8xf32>
}
func.func private @layer_backward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %h: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>) attributes {megac.role = #megac.role<layer_backward>, megac.forward_args = array<i64: 0, 1>} {
  %dh = tx.gelu_grad %dy, %h (tanh) : tensor<4x8xf32>
  %dx = tx.matmul %dh, %w transpose_rhs : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %dw = tx.matmul %x, %dh transpose_lhs : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  return %dx, %dw : tensor<4x8xf32>, tensor<8x8xf32>
}
func.func @train_step(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  %w0 = tx.param "h.0.w" init(normal) : tensor<8x8xf32>
  %l0:2 = call @layer_forward(%e, %w0) {megac.layer = @layer, megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %w1 = tx.param "h.1.w" init(normal) : tensor<8x8xf32>
  %l1:2 = call @layer_forward(%l0#0, %w1) {megac.layer = @layer, megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %w2 = tx.param "h.2.w" init(normal) : tensor<8x8xf32>
  %l2:2 = call @layer_forward(%l1#0, %w2) {megac.layer = @layer, megac.layer_index = 2 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %loss = tx.cross_entropy %l2#0, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  %d = tx.cross_entropy_grad %dloss, %l2#0, %labels : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %b2:2 = call @layer_backward(%l1#0, %w2, %l2#1, %d) {megac.layer_index = 2 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  tx.param_grad %b2#1 to %w2 : tensor<8x8xf32>
  %b1:2 = call @layer_backward(%l0#0, %w1, %l1#1, %b2#0) {megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  tx.param_grad %b1#1 to %w1 : tensor<8x8xf32>
  %b0:2 = call @layer_backward(%e, %w0, %l0#1, %b1#0) {megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  tx.param_grad %b0#1 to %w0 : tensor<8x8xf32>
  %de = tx.embedding_grad %b0#0, %ids : tensor<4x8xf32>, tensor<4xi32> -> tensor<8x8xf32>
  tx.param_grad %de to %wte : tensor<8x8xf32>
  return %loss : tensor<f32>
}

// -----

// No recompute_* keys: nothing changes.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, sequence_parallel = false>}
// CHECK:         megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, sequence_parallel = false,
// CHECK-NOT:     layer_forward_only
// CHECK-NOT:     megac.recompute
func.func private @layer_forward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) attributes {megac.role = #megac.role<layer_forward>, megac.saved_from = 1 : i64} {
  %h = tx.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %y = tx.gelu %h (tanh) : tensor<4x8xf32>
  return %y, %h : tensor<4x8xf32>, tensor<4x8xf32>
}
func.func private @layer_backward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %h: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>) attributes {megac.role = #megac.role<layer_backward>, megac.forward_args = array<i64: 0, 1>} {
  %dh = tx.gelu_grad %dy, %h (tanh) : tensor<4x8xf32>
  %dx = tx.matmul %dh, %w transpose_rhs : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %dw = tx.matmul %x, %dh transpose_lhs : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  return %dx, %dw : tensor<4x8xf32>, tensor<8x8xf32>
}
func.func @train_step(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<8x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  %w0 = tx.param "h.0.w" init(normal) : tensor<8x8xf32>
  %l0:2 = call @layer_forward(%e, %w0) {megac.layer = @layer, megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %w1 = tx.param "h.1.w" init(normal) : tensor<8x8xf32>
  %l1:2 = call @layer_forward(%l0#0, %w1) {megac.layer = @layer, megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %w2 = tx.param "h.2.w" init(normal) : tensor<8x8xf32>
  %l2:2 = call @layer_forward(%l1#0, %w2) {megac.layer = @layer, megac.layer_index = 2 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %loss = tx.cross_entropy %l2#0, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  %d = tx.cross_entropy_grad %dloss, %l2#0, %labels : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %b2:2 = call @layer_backward(%l1#0, %w2, %l2#1, %d) {megac.layer_index = 2 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  tx.param_grad %b2#1 to %w2 : tensor<8x8xf32>
  %b1:2 = call @layer_backward(%l0#0, %w1, %l1#1, %b2#0) {megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  tx.param_grad %b1#1 to %w1 : tensor<8x8xf32>
  %b0:2 = call @layer_backward(%e, %w0, %l0#1, %b1#0) {megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  tx.param_grad %b0#1 to %w0 : tensor<8x8xf32>
  %de = tx.embedding_grad %b0#0, %ids : tensor<4x8xf32>, tensor<4xi32> -> tensor<8x8xf32>
  tx.param_grad %de to %wte : tensor<8x8xf32>
  return %loss : tensor<f32>
}
