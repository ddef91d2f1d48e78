// RUN: megac-opt %s -split-input-file -verify-diagnostics --megac-recompute
// Programs megac-recompute rejects, one per case, each saying what to change.

// It runs after megac-autodiff, on @train_step (not on the frontend's @forward).
// expected-error @+1 {{megac-recompute: no @train_step; run megac-autodiff first}}
module {
  shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, recompute_granularity = "full", recompute_method = "uniform", recompute_num_layers = 1, distribute_saved_activations = false>}
  func.func @forward(%ids: tensor<4xi32>, %labels: tensor<4xi32>) -> tensor<f32> {
    %wte = tx.param "wte" init(normal) : tensor<8x8xf32>
    %e = tx.embedding %wte[%ids] : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
    %loss = tx.cross_entropy %e, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A layer's halves carry what megac-autodiff records: here @layer_forward has no megac.saved_from.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, recompute_granularity = "selective", recompute_modules = ["mlp"]>}
func.func private @layer_forward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) attributes {megac.role = #megac.role<layer_forward>} {
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
  // expected-error @+1 {{'func.call' op calls layer @layer, whose halves @layer_forward (megac.saved_from) and @layer_backward (megac.forward_args) megac-autodiff makes; run it first}}
  %l0:2 = call @layer_forward(%e, %w0) {megac.layer = @layer, megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %w1 = tx.param "h.1.w" init(normal) : tensor<8x8xf32>
  %l1:2 = call @layer_forward(%l0#0, %w1) {megac.layer = @layer, megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %loss = tx.cross_entropy %l1#0, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  %d = tx.cross_entropy_grad %dloss, %l1#0, %labels : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %b1:2 = call @layer_backward(%l0#0, %w1, %l1#1, %d) {megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  %b0:2 = call @layer_backward(%e, %w0, %l0#1, %b1#0) {megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  return %loss : tensor<f32>
}

// -----

// Every layer's forward call has its backward call: layer 0's is missing.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, recompute_granularity = "full", recompute_method = "uniform", recompute_num_layers = 1, distribute_saved_activations = false>}
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
  // expected-error @+1 {{'func.call' op has no backward call of @layer; run megac-autodiff first}}
  %l0:2 = call @layer_forward(%e, %w0) {megac.layer = @layer, megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %w1 = tx.param "h.1.w" init(normal) : tensor<8x8xf32>
  %l1:2 = call @layer_forward(%l0#0, %w1) {megac.layer = @layer, megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %loss = tx.cross_entropy %l1#0, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  %d = tx.cross_entropy_grad %dloss, %l1#0, %labels : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %b1:2 = call @layer_backward(%l0#0, %w1, %l1#1, %d) {megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
  return %loss : tensor<f32>
}

// -----

// The pipeline layout must place the layers @train_step calls (3 placed, 2 called).
// expected-error @+1 {{megac-recompute: the plan's pipeline_layout places 3 layers, @train_step calls 2}}
module {
  shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_layout = [1, 2], pipeline_schedule = "1f1b", recompute_granularity = "full", recompute_method = "uniform", recompute_num_layers = 1, distribute_saved_activations = false>}
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
    %loss = tx.cross_entropy %l1#0, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
    %d = tx.cross_entropy_grad %dloss, %l1#0, %labels : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
    %b1:2 = call @layer_backward(%l0#0, %w1, %l1#1, %d) {megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
    %b0:2 = call @layer_backward(%e, %w0, %l0#1, %b1#0) {megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
    return %loss : tensor<f32>
  }
}

// -----

// A uniform group cannot be larger than the model (2 layers).
// expected-error @+1 {{megac-recompute: --recompute-num-layers 3 is more than the 2 layers of the largest model; give a number from 1 to 2 (groups never cross a chunk)}}
module {
  shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, recompute_granularity = "full", recompute_method = "uniform", recompute_num_layers = 3, distribute_saved_activations = false>}
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
    %loss = tx.cross_entropy %l1#0, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
    %d = tx.cross_entropy_grad %dloss, %l1#0, %labels : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
    %b1:2 = call @layer_backward(%l0#0, %w1, %l1#1, %d) {megac.layer_index = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
    %b0:2 = call @layer_backward(%e, %w0, %l0#1, %b1#0) {megac.layer_index = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>)
    return %loss : tensor<f32>
  }
}

// -----

// The plan's keys are checked as megac compile checks its flags: full needs a method.
// expected-error @+2 {{megac.plan: --recompute-granularity full needs --recompute-method uniform}}
module {
  shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, recompute_granularity = "full", recompute_num_layers = 1>}
}
