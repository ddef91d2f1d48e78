// RUN: megac-opt %s -split-input-file -verify-diagnostics --megac-autocast
// Programs megac-autocast rejects, one per case, each saying what is wrong.

// A function gets one signature: a layer called with a 16-bit activation and, again, with an
// fp32 value (computed from the parameters alone) cannot take both.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, activation_precision = "bf16">}
// expected-error @+1 {{'func.func' op is called with activations of different types; megac-autocast gives a function one signature}}
func.func private @layer(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %g = tx.gelu %x (tanh) : tensor<1x4x8xf32>
  return %g : tensor<1x4x8xf32>
}
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %l0 = call @layer(%e) : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %p = tx.param "p" init(normal) : tensor<1x4x8xf32>
  %l1 = call @layer(%p) : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %s = tx.add %l0, %l1 : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %logits = tx.matmul %s, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A declared function has no body to retype.
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, activation_precision = "bf16">}
func.func private @external(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
func.func @forward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %e = tx.embedding %wte[%ids] : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  // expected-error @+1 {{'func.call' op calls a function megac-autocast cannot see}}
  %l0 = call @external(%e) : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %logits = tx.matmul %l0, %wte transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tx.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// It runs before megac-autodiff, on the frontend's @forward.
// expected-error @+1 {{megac-autocast: expected the frontend's @forward (it runs before megac-autodiff)}}
module {
  shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, activation_precision = "bf16">}
  func.func @train_step(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>, %dloss: tensor<f32>) -> tensor<f32> {
    return %dloss : tensor<f32>
  }
}

// -----

// The precision is read from @grid's plan: an unknown one is named.
// expected-error @+2 {{megac.plan's activation_precision must be a string (fp32, bf16 or fp16), got "fp8"}}
module {
  shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1, activation_precision = "fp8">}
}

// -----

// Without @grid there is no plan to read.
// expected-error @+1 {{megac-autocast: the module has no shard.grid @grid}}
module {
}
