// RUN: megac-opt %s --megac-fuse-nf4-loads -split-input-file | FileCheck %s
// What megac-fuse-nf4-loads fuses (QLoRA's base GEMMs, in the layer halves megac-autodiff makes),
// and what it must leave alone.

// A layer's forward: the base GEMM reads its NF4 weight directly and the tx.nf4_dequantize goes;
// the adapter's GEMM (an fp32 weight, scaled) is untouched.
// CHECK-LABEL: func.func private @layer_forward
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[A:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<16x2xf32>)
// CHECK-NEXT:    %[[Y:.*]] = tx.matmul_nf4 %[[X]], %[[W]] : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT:    %[[D:.*]] = tx.matmul %[[X]], %[[A]] transpose_rhs : tensor<2x4x8xf32>, tensor<2x8xf32> -> tensor<2x4x2xf32>
// CHECK-NEXT:    %[[U:.*]] = tx.matmul %[[D]], %[[B]] transpose_rhs scale 2.000000e+00 :
// CHECK-NEXT:    %[[S:.*]] = tx.add %[[Y]], %[[U]]
// CHECK-NEXT:    return %[[S]]
func.func private @layer_forward(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>, %a: tensor<2x8xf32>, %b: tensor<16x2xf32>) -> tensor<2x4x16xf32> attributes {megac.role = #megac.role<layer_forward>} {
  %wd = tx.nf4_dequantize %w : tensor<8x16xf32>
  %y = tx.matmul %x, %wd : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %down = tx.matmul %x, %a transpose_rhs : tensor<2x4x8xf32>, tensor<2x8xf32> -> tensor<2x4x2xf32>
  %up = tx.matmul %down, %b transpose_rhs scale 2.0 : tensor<2x4x2xf32>, tensor<16x2xf32> -> tensor<2x4x16xf32>
  %s = tx.add %y, %up : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  return %s : tensor<2x4x16xf32>
}

// -----

// A layer's backward: the input gradient reads the weight transposed, which the fused GEMM keeps.
// CHECK-LABEL: func.func private @layer_backward
// CHECK-SAME:    (%[[DY:.*]]: tensor<2x4x16xf32>, %[[W:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %[[DX:.*]] = tx.matmul_nf4 %[[DY]], %[[W]] transpose_rhs : tensor<2x4x16xf32>, tensor<8x16xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT:    return %[[DX]]
func.func private @layer_backward(%dy: tensor<2x4x16xf32>, %w: tensor<8x16xf32>) -> tensor<2x4x8xf32> attributes {megac.role = #megac.role<layer_backward>} {
  %wd = tx.nf4_dequantize %w : tensor<8x16xf32>
  %dx = tx.matmul %dy, %wd transpose_rhs : tensor<2x4x16xf32>, tensor<8x16xf32> -> tensor<2x4x8xf32>
  return %dx : tensor<2x4x8xf32>
}

// -----

// One dequantized weight read by two GEMMs: both fused, the dequantize gone once neither reads it.
// CHECK-LABEL: func.func @two_products
// CHECK-NOT:     tx.nf4_dequantize
// CHECK:         tx.matmul_nf4 %arg0, %arg2 :
// CHECK-NEXT:    tx.matmul_nf4 %arg1, %arg2 :
// CHECK-NOT:     tx.nf4_dequantize
func.func @two_products(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %wd = tx.nf4_dequantize %w : tensor<8x16xf32>
  %y1 = tx.matmul %x, %wd : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %y2 = tx.matmul %z, %wd : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %y1, %y2 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// The fused GEMM keeps the sharding megac-tensor-parallel recorded on the product.
// CHECK-LABEL: func.func @keeps_sharding
// CHECK-NEXT:    tx.matmul_nf4 %arg0, %arg1 {megac.sharding = #tx.sharding<[{}, {"tp"}]>} :
func.func @keeps_sharding(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %wd = tx.nf4_dequantize %w {megac.sharding = #tx.sharding<[{}, {"tp"}]>} : tensor<8x16xf32>
  %y = tx.matmul %x, %wd {megac.sharding = #tx.sharding<[{}, {"tp"}]>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Left alone: the dequantized weight as the lhs, under transpose_lhs, in a scaled product, as
// both operands, and read by something besides a GEMM. Only the plain product is fused, and the
// dequantize stays for the others.
// CHECK-LABEL: func.func @not_base_products
// CHECK-NEXT:    %[[WD:.*]] = tx.nf4_dequantize %arg1
// CHECK-NEXT:    tx.matmul %[[WD]], %arg2 :
// CHECK-NEXT:    tx.matmul %arg3, %[[WD]] transpose_lhs :
// CHECK-NEXT:    tx.matmul %arg0, %[[WD]] scale 5.000000e-01 :
// CHECK-NEXT:    tx.matmul %[[WD]], %[[WD]] transpose_rhs :
// CHECK-NEXT:    tx.add %[[WD]], %[[WD]]
// CHECK-NEXT:    tx.matmul_nf4 %arg0, %arg1 :
// CHECK-NEXT:    return
func.func @not_base_products(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %v: tensor<8x16xf32>, %g: tensor<8x4xf32>)
    -> (tensor<8x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) {
  %wd = tx.nf4_dequantize %w : tensor<8x8xf32>
  %lhs = tx.matmul %wd, %v : tensor<8x8xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %tl = tx.matmul %g, %wd transpose_lhs : tensor<8x4xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %scaled = tx.matmul %x, %wd scale 0.5 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %both = tx.matmul %wd, %wd transpose_rhs : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %sum = tx.add %wd, %wd : tensor<8x8xf32>, tensor<8x8xf32>
  %base = tx.matmul %x, %wd : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  return %lhs, %tl, %scaled, %both, %sum, %base : tensor<8x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>
}

// -----

// Not a QLoRA program (no tx.nf4_dequantize): nothing changes.
// CHECK-LABEL: func.func @plain
// CHECK-NEXT:    tx.matmul %arg0, %arg1 :
// CHECK-NOT:     tx.matmul_nf4
func.func @plain(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = tx.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
