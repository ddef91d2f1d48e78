//===----------------------------------------------------------------------===//
// Fused ops: made by megac-fuse-epilogues and megac-fuse-nf4-loads after autodiff, for the
// emitter only (no VJP)
//===----------------------------------------------------------------------===//

#ifndef MEGAC_TX_FUSED_OPS_TD
#define MEGAC_TX_FUSED_OPS_TD

include "tx/TxBase.td"
include "tx/TxInterfaces.td"

def Tx_MatmulBiasOp : Tx_Op<"matmul_bias", [Tx_KernelCall, Pure, DeclareOpInterfaceMethods<Tx_GemmOpInterface>]> {
  let summary = "a linear layer in one GEMM: input [..., K] x weight + bias, the bias in the GEMM's epilogue";
  let description = [{
    `tx.matmul %input, %weight` followed by `tx.add` of a bias `[N]`. `weight` is `[K, N]`
    (`[N, K]` with `transpose_rhs`); the result is `[..., N]`. Made by megac-fuse-epilogues.
  }];
  let arguments = (ins Tx_FloatTensor:$input, Tx_FloatTensor:$weight, Tx_FloatTensor:$bias,
                       UnitAttr:$transpose_rhs);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias (`transpose_rhs` $transpose_rhs^)? attr-dict
    `:` type($input) `,` type($weight) `,` type($bias) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tx_MatmulBiasGeluOp : Tx_Op<"matmul_bias_gelu", [Tx_KernelCall, Pure, AllTypesMatch<["pre", "result"]>,
                                                     DeclareOpInterfaceMethods<Tx_GemmOpInterface>]> {
  let summary = "a linear layer and its GELU in one call: the pre-activation (kept for backward) and the output";
  let description = [{
    `pre = input x weight + bias` as `tx.matmul_bias` (the bias in the GEMM's epilogue), and
    `result = gelu(pre)` right after it. Made by megac-fuse-epilogues.
  }];
  let arguments = (ins Tx_FloatTensor:$input, Tx_FloatTensor:$weight, Tx_FloatTensor:$bias,
                       UnitAttr:$transpose_rhs, Tx_GeluApproximation:$approximation);
  let results = (outs Tx_FloatTensor:$pre, Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias (`transpose_rhs` $transpose_rhs^)? ` ` `(` $approximation `)` attr-dict
    `:` type($input) `,` type($weight) `,` type($bias) `->` type($pre)
  }];
  let hasVerifier = 1;
}

def Tx_MatmulNf4Op : Tx_Op<"matmul_nf4", [Tx_KernelCall, Pure, DeclareOpInterfaceMethods<Tx_GemmOpInterface>]> {
  let summary = "QLoRA's base GEMM: input [..., K] x a frozen NF4 weight, dequantized in the GEMM's operand load";
  let description = [{
    `tx.matmul %input, (tx.nf4_dequantize %weight)` without the dequantized matrix: the GEMM
    dequantizes `weight` (a frozen `tx.param` with `nf4`, or the argument a layer function gets
    it as) a tile at a time as it reads it, so no workspace buffer of the whole weight exists.
    `weight` is `[K, N]` (`[N, K]` with `transpose_rhs`); the result is `[..., N]`. Made by
    megac-fuse-nf4-loads.
  }];
  let arguments = (ins Tx_FloatTensor:$input, Tx_FloatTensor:$weight, UnitAttr:$transpose_rhs);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`transpose_rhs` $transpose_rhs^)? attr-dict `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // MEGAC_TX_FUSED_OPS_TD
