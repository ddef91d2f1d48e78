// Forward operations of the `tx` dialect.
#ifndef MEGAC_TX_OPS_TD
#define MEGAC_TX_OPS_TD

include "tx/TxBase.td"
include "tx/TxInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

def Tx_ParamOp : Tx_Op<"param", [Tx_ShardingRule, Pure]> {
  let summary = "a trainable parameter";
  let description = [{
    Declares a parameter by its checkpoint name (Hugging Face names, so checkpoints load in
    `transformers`). Without `at`, the value is the whole checkpoint tensor. With
    `at [offsets] of [full shape]`, the value is the block of the checkpoint tensor of
    `full shape` that starts at `offsets` and has the result's extent; this is how a fused
    checkpoint tensor (GPT-2's `c_attn`) is split into query, key and value, and how a tensor
    parallel rank holds its shard: after megac-tensor-parallel a value split along dimension d
    (its `megac.sharding`) is rank 0's block at `offsets`, and rank r's starts r * (its size
    along d) further. `padded` lets the block reach past the checkpoint tensor:
    the vocabulary padding of Megatron's --make-vocab-size-divisible-by, zero and never saved.
    `role` is what the parameter is in Megatron's tensor-parallel placement (the frontend knows
    it; megac-tensor-parallel shards by it) and `parallel_dim` the dimension that placement
    splits: the output features of a column-parallel weight or bias, the input features of a
    row-parallel weight, the vocabulary of an embedding. Without a role the parameter stays
    whole. `init` says how training initialises it without a checkpoint.
    Rank-1 parameters (biases, norm weights) get no weight decay. A `frozen` parameter is
    read, never trained (the base model under LoRA): it gets no gradient and no optimizer
    state, and the runtime keeps it apart from the trainable ones (StepContext::frozen). With
    `nf4 B` (QLoRA) the runtime keeps a frozen matrix in 4-bit NormalFloat with double
    quantization in blocks of B elements; only `tx.nf4_dequantize` reads it.

    ```mlir
    %wte = tx.param "transformer.wte.weight" role vocab_embedding parallel_dim 0
             init(normal, std = 2.0e-02) : tensor<257x64xf32>
    %wq = tx.param "transformer.h.0.attn.c_attn.weight" at [0, 0] of [64, 192]
            role column_parallel_weight parallel_dim 1 init(normal, std = 2.0e-02) : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<DenseI64ArrayAttr>:$offsets,
                       OptionalAttr<DenseI64ArrayAttr>:$full_shape, UnitAttr:$padded,
                       OptionalAttr<Tx_ParamRole>:$role, OptionalAttr<I64Attr>:$parallel_dim,
                       Tx_ParamInit:$init, OptionalAttr<F64Attr>:$std, UnitAttr:$frozen,
                       OptionalAttr<I64Attr>:$nf4_block);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $name (`at` $offsets^ `of` $full_shape)? (`padded` $padded^)? (`role` $role^)? (`parallel_dim` $parallel_dim^)?
    `init` `(` $init (`,` `std` `=` $std^)? `)` (`frozen` $frozen^)? (`nf4` $nf4_block^)?
    attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Tx_Nf4DequantizeOp : Tx_Op<"nf4_dequantize", [Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>,
                                                   SameOperandsAndResultType]> {
  let summary = "a frozen NF4 weight (QLoRA's base) as the float matrix it stands for";
  let description = [{
    `weight` is a frozen `tx.param` with `nf4` (or the argument a layer function gets it as),
    which the runtime stores in 4-bit NormalFloat with double quantization (megart/nf4.h: the
    layout of bitsandbytes' quantize_4bit); the result is its dequantized value, a workspace
    buffer that lives until the GEMM that reads it. megac-autodiff computes it again in the
    backward rather than keep it.
  }];
  let arguments = (ins Tx_FloatTensor:$weight);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$weight attr-dict `:` type($weight)";
}

//===----------------------------------------------------------------------===//
// Linear algebra and elementwise
//===----------------------------------------------------------------------===//

def Tx_EmbeddingOp : Tx_Op<"embedding", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>]> {
  let summary = "row lookup: result[..., :] = table[ids[...], :]";
  let description = [{
    With `vocab_parallel`, `table` is this tensor-parallel rank's contiguous share of the
    vocabulary (rows rank * vocab_local ...); ids outside it give zero rows, so the sum over the
    ranks is the full lookup.
  }];
  let arguments = (ins Tx_FloatTensor:$table, Tx_IdTensor:$ids, UnitAttr:$vocab_parallel);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $table `[` $ids `]` (`vocab_parallel` $vocab_parallel^)? attr-dict `:` type($table) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tx_MatmulOp : Tx_Op<"matmul", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>,
                                      DeclareOpInterfaceMethods<Tx_GemmOpInterface>]> {
  let summary = "matrix product, batched over leading dimensions";
  let description = [{
    `lhs` is `[..., M, K]` (`[..., K, M]` with `transpose_lhs`). `rhs` is either a matrix
    `[K, N]` (`[N, K]` with `transpose_rhs`), shared by every batch entry, or has the same
    batch dimensions as `lhs`. The result is `[..., M, N]`, times `scale` when given (the
    GEMM's alpha: LoRA's alpha / r).
  }];
  let arguments = (ins Tx_FloatTensor:$lhs, Tx_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs, OptionalAttr<F64Attr>:$scale);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)? (`scale` $scale^)? attr-dict
    `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

class Tx_BroadcastBinaryOp<string mnemonic, string math> :
    Tx_Op<mnemonic, [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>, AllTypesMatch<["lhs", "result"]>]> {
  let summary = "elementwise " # math # ", `rhs` broadcast over leading dimensions";
  let description = [{
    `rhs` has the shape of `lhs` or of a trailing part of it (a bias `[N]` added to `[B, S, N]`).
  }];
  let arguments = (ins Tx_FloatTensor:$lhs, Tx_FloatTensor:$rhs);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let hasVerifier = 1;
}

def Tx_AddOp : Tx_BroadcastBinaryOp<"add", "sum">;
def Tx_MulOp : Tx_BroadcastBinaryOp<"mul", "product">;

def Tx_ReshapeOp : Tx_Op<"reshape", [Tx_ReferenceEval, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>]> {
  let summary = "same elements, new static shape (row-major order kept)";
  let arguments = (ins Tx_FloatTensor:$input);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Tx_SliceOp : Tx_Op<"slice", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>]> {
  let summary = "contiguous slice along one dimension";
  let description = [{
    Takes `result.shape[dim]` entries of `input` along `dim`, starting at `offset`; the other
    dimensions are kept whole.
  }];
  let arguments = (ins Tx_FloatTensor:$input, I64Attr:$dim, I64Attr:$offset);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$input `dim` $dim `offset` $offset attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalisation and activations
//===----------------------------------------------------------------------===//

def Tx_LayerNormOp : Tx_Op<"layer_norm", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>, AllTypesMatch<["input", "result"]>]> {
  let summary = "LayerNorm over the last dimension: (x - mean) / sqrt(var + eps) * weight + bias";
  let arguments = (ins Tx_FloatTensor:$input, Tx_FloatTensor:$weight, Tx_FloatTensor:$bias, F64Attr:$epsilon);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `eps` $epsilon attr-dict `:` type($input) `,` type($weight) `,` type($bias)
  }];
  let hasVerifier = 1;
}

def Tx_RmsNormOp : Tx_Op<"rms_norm", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>, AllTypesMatch<["input", "result"]>]> {
  let summary = "RMSNorm over the last dimension: x / sqrt(mean(x^2) + eps) * weight";
  let description = [{
    With `weight_offset` c, the scale is (weight + c): Gemma's (1 + w), a weight centred at zero
    (Megatron's apply_layernorm_1p).
  }];
  let arguments = (ins Tx_FloatTensor:$input, Tx_FloatTensor:$weight, F64Attr:$epsilon,
                       OptionalAttr<F64Attr>:$weight_offset);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `eps` $epsilon (`weight_offset` $weight_offset^)? attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Tx_ScaleOp : Tx_Op<"scale", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>, SameOperandsAndResultType]> {
  let summary = "x * factor, elementwise";
  let description = [{
    A constant factor, e.g. Gemma's embeddings scaled by sqrt(hidden_size). The factor is
    applied in the tensor's precision (float32 for a float32 tensor), as transformers does.
  }];
  let arguments = (ins Tx_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Tx_GeluOp : Tx_Op<"gelu", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>, SameOperandsAndResultType]> {
  let summary = "GELU, tanh approximation or exact (erf)";
  let arguments = (ins Tx_FloatTensor:$input, Tx_GeluApproximation:$approximation);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$input ` ` `(` $approximation `)` attr-dict `:` type($input)";
}

def Tx_SwigluOp : Tx_Op<"swiglu", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>, AllTypesMatch<["gate", "result"]>]> {
  let summary = "SwiGLU: silu(gate) * up";
  let arguments = (ins Tx_FloatTensor:$gate, Tx_FloatTensor:$up);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($gate) `,` type($up)";
  let hasVerifier = 1;
}

def Tx_DropoutOp : Tx_Op<"dropout", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>, SameOperandsAndResultType]> {
  let summary = "dropout: zero each element with probability `rate`, scale the rest by 1/(1-rate)";
  let description = [{
    The mask is a function of the run's seed, the iteration, the layer that runs the op (the
    `megac.layer_index` of its function's call; none outside layers), `stream` (the site within
    the layer) and each element's coordinates in the iteration's global batch (megart/dropout.h),
    so the backward pass (the same op on the gradient) and every parallel plan draw the same
    mask. Evaluation runs it as the identity.
  }];
  let arguments = (ins Tx_FloatTensor:$input, F64Attr:$rate, I64Attr:$stream);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$input `rate` $rate `stream` $stream attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Tx_RopeOp : Tx_Op<"rope", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>, SameOperandsAndResultType]> {
  let summary = "rotary position embedding, rotate_half convention";
  let description = [{
    `input` is `[batch, seq, heads, head_dim]` with an even `head_dim`. Position p of the
    sequence and frequency i < head_dim/2 rotate the pair (x[i], x[i + head_dim/2]) by
    p * theta^(-2i/head_dim), as Hugging Face Llama does. `inverse` rotates the other way,
    which is also the rotation's gradient. With `positions_divided_by` f, position p rotates as
    p / f (transformers' linear rope scaling: a model made for n positions reads f x n).
  }];
  let arguments = (ins Tx_FloatTensor:$input, F64Attr:$theta, UnitAttr:$inverse,
                       OptionalAttr<F64Attr>:$position_divisor);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $input `theta` $theta (`positions_divided_by` $position_divisor^)? (`inverse` $inverse^)? attr-dict
    `:` type($input)
  }];
  let hasVerifier = 1;
}

def Tx_AttentionOp : Tx_Op<"attention", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>,
                                            DeclareOpInterfaceMethods<Tx_AttentionOpInterface>]> {
  let summary = "scaled dot-product attention with grouped query heads";
  let description = [{
    `query` is `[batch, seq, heads, head_dim]`; `key` and `value` are
    `[batch, seq, query_groups, head_dim]` with `heads` a multiple of `query_groups`: query
    head h attends with key/value head h / (heads / query_groups). With `causal`, position i
    sees keys 0..i; with `window` w as well (causal only), the keys i - w..i: the token and at
    most w before it (transformers 4.40's sliding_window, Mistral's and Qwen2's). Scores are
    `scale * q.k`, softmax over keys. With `dropout`, the
    probabilities are dropped at that rate (stream megac::names::kAttentionDropoutStream of the
    layer that runs it; the mask is recomputed in the backward, never stored).
  }];
  let arguments = (ins Tx_FloatTensor:$query, Tx_FloatTensor:$key, Tx_FloatTensor:$value,
                       UnitAttr:$causal, OptionalAttr<I64Attr>:$window, F64Attr:$scale,
                       OptionalAttr<F64Attr>:$dropout);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`causal` $causal^)? (`window` $window^)? `scale` $scale (`dropout` $dropout^)? attr-dict
    `:` type($query) `,` type($key) `,` type($value) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def Tx_CrossEntropyOp : Tx_Op<"cross_entropy", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>]> {
  let summary = "softmax cross-entropy, mean over all tokens";
  let description = [{
    `logits` is `[..., vocab]`, `labels` has the leading dimensions of `logits`. The result is
    the mean over all label positions of `-log softmax(logits)[label]`. With `vocab_size`, only
    the first `vocab_size` columns are real; the rest is vocabulary padding, left out of the softmax.
    With `ignore_index` (negative: transformers' -100), positions with that label take no part: the
    mean is over the others (a masked language model's masked positions), 0 when there are none.
  }];
  let arguments = (ins Tx_FloatTensor:$logits, Tx_IdTensor:$labels, OptionalAttr<I64Attr>:$vocab_size,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Tx_FloatScalar:$result);
  let assemblyFormat = [{
    $logits `,` $labels (`vocab_size` $vocab_size^)? (`ignore_index` $ignore_index^)? attr-dict
    `:` type($logits) `,` type($labels) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // MEGAC_TX_OPS_TD
