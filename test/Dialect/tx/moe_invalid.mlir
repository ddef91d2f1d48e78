// RUN: megac-opt %s -split-input-file -verify-diagnostics
// The mixture-of-experts ops' verifiers: each message names the operand, what was found and what
// was expected.

func.func @route_topk_above_experts(%l: tensor<6x4xf32>) {
  // expected-error @+1 {{topk is 5; it must be between 1 and the 4 experts}}
  %p, %e, %w = tx.moe_route %l topk 5 : tensor<6x4xf32> -> tensor<6x5xi32>, tensor<6x5xf32>
  return
}

// -----

func.func @route_choices_shape(%l: tensor<6x4xf32>) {
  // expected-error @+1 {{experts has shape [6, 3] but expected [6, 2] (one entry per token and choice)}}
  %p, %e, %w = tx.moe_route %l topk 2 : tensor<6x4xf32> -> tensor<6x3xi32>, tensor<6x2xf32>
  return
}

// -----

func.func @scatter_rows_count(%x: tensor<6x4xf32>, %rows: tensor<6x2xi32>) {
  // expected-error @+1 {{the rows in expert order has 10 rows but rows [6, 2] places 12 choices}}
  %y = tx.moe_scatter %x, %rows : tensor<6x4xf32>, tensor<6x2xi32> -> tensor<10x4xf32>
  return
}

// -----

func.func @gather_width(%y: tensor<12x4xf32>, %rows: tensor<6x2xi32>) {
  // expected-error @+1 {{the token rows has shape [6, 5] but expected [6, 4] (one row per token, as wide as the rows in expert order)}}
  %x = tx.moe_gather %y, %rows : tensor<12x4xf32>, tensor<6x2xi32> -> tensor<6x5xf32>
  return
}

// -----

func.func @grouped_experts(%x: tensor<12x4xf32>, %w: tensor<8x5x4xf32>, %c: tensor<6xi32>) {
  // expected-error @+1 {{rhs [8, 5, 4] holds 8 experts but counts [6] counts 6}}
  %h = tx.grouped_matmul %x, %w, %c transpose_rhs : tensor<12x4xf32>, tensor<8x5x4xf32>, tensor<6xi32> -> tensor<12x5xf32>
  return
}

// -----

func.func @grouped_contraction(%x: tensor<12x4xf32>, %w: tensor<8x5x4xf32>, %c: tensor<8xi32>) {
  // expected-error @+1 {{contraction sizes differ: lhs [12, 4] gives 4, rhs [8, 5, 4] gives 5}}
  %h = tx.grouped_matmul %x, %w, %c : tensor<12x4xf32>, tensor<8x5x4xf32>, tensor<8xi32> -> tensor<12x4xf32>
  return
}

// -----

func.func @weight_grad_rows(%x: tensor<12x4xf32>, %dy: tensor<10x5xf32>, %c: tensor<8xi32>) {
  // expected-error @+1 {{lhs [12, 4] and grad [10, 5] must have the same rows}}
  %dw = tx.grouped_matmul_weight_grad %x, %dy, %c : tensor<12x4xf32>, tensor<10x5xf32>, tensor<8xi32> -> tensor<8x4x5xf32>
  return
}

// -----

// Attributes are read signed: a negative capacity or expert count is named as written.
func.func @drop_negative_capacity(%e: tensor<6x2xi32>, %w: tensor<6x2xf32>) {
  // expected-error @+1 {{capacity is -1; it must be between 0 and the 6 tokens}}
  %k, %m = tx.moe_drop %e, %w capacity -1 of 4 experts : tensor<6x2xi32>, tensor<6x2xf32>
  return
}

// -----

func.func @drop_negative_experts(%e: tensor<6x2xi32>, %w: tensor<6x2xf32>) {
  // expected-error @+1 {{has -4 experts; it needs at least 1}}
  %k, %m = tx.moe_drop %e, %w capacity 2 of -4 experts : tensor<6x2xi32>, tensor<6x2xf32>
  return
}

// -----

func.func @expert_load_not_a_row(%c: tensor<2x4xi32>) {
  // expected-error @+1 {{counts}}
  tx.record_expert_load %c : tensor<2x4xi32>
  return
}
