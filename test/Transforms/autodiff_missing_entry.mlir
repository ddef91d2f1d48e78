// RUN: megac-opt %s -verify-diagnostics --megac-autodiff=entry=nope
// A missing entry function is an error that names it.

// expected-error @+1 {{megac-autodiff: no function @nope to differentiate}}
module {
  func.func @forward(%ids: tensor<2x3xi32>, %labels: tensor<2x3xi32>) -> tensor<f32> {
    %x = tx.param "x" init(normal) : tensor<2x3x4xf32>
    %loss = tx.cross_entropy %x, %labels : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
