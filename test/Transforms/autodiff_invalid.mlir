// RUN: megac-opt %s -split-input-file -verify-diagnostics --megac-autodiff
// Programs megac-autodiff rejects, one per case, each with a message saying what to change.

// expected-error @+1 {{'func.func' op must return exactly one scalar loss (tensor<f32>) to be differentiated}}
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<2x3xf32> {
  %x = tx.param "x" init(normal) : tensor<2x3xf32>
  return %x : tensor<2x3xf32>
}

// -----

// expected-error @+1 {{'func.func' op must return exactly one scalar loss (tensor<f32>) to be differentiated}}
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> (tensor<f32>, tensor<f32>) {
  %x = tx.param "x" init(normal) : tensor<2x3x4xf32>
  %loss = tx.cross_entropy %x, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss, %loss : tensor<f32>, tensor<f32>
}

// -----

func.func private @layer(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'tx.param' op inside a called function is not supported by megac-autodiff: pass parameters as arguments and call functions from the entry only}}
  %w = tx.param "w" init(normal) : tensor<4x4xf32>
  %h = tx.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>
  return %h : tensor<2x3x4xf32>
}
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x4xf32>
  %y = func.call @layer(%x) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func private @inner(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %h = tx.gelu %x (tanh) : tensor<2x3x4xf32>
  return %h : tensor<2x3x4xf32>
}
func.func private @layer(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'func.call' op inside a called function is not supported by megac-autodiff}}
  %h = func.call @inner(%x) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %h : tensor<2x3x4xf32>
}
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x4xf32>
  %y = func.call @layer(%x) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op is called from the differentiated function but has no body}}
func.func private @layer(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x4xf32>
  %y = func.call @layer(%x) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// An op without VjpOpInterface that the loss depends on (a gradient op's sum; a constant such as
// tx.zeros is a leaf, nothing before it to differentiate).
func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x3x4xf32>
  // expected-error @+1 {{'tx.reduce_sum' op has no vector-Jacobian product}}
  %z = tx.reduce_sum %x : tensor<2x3x4xf32> -> tensor<4xf32>
  %y = tx.add %x, %z : tensor<2x3x4xf32>, tensor<4xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %x = tx.param "x" init(normal) : tensor<2x4x3xf32>
  %w = tx.param "w" init(normal) : tensor<4x5xf32>
  // expected-error @+1 {{'tx.matmul' op autodiff does not handle transpose_lhs with a broadcast rhs}}
  %y = tx.matmul %x, %w transpose_lhs : tensor<2x4x3xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %loss = tx.cross_entropy %y, %labels : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
