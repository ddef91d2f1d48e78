// Operations the backward pass is made of. `megac-autodiff` creates them; they are plain
// value-semantics ops like the forward ones, so every later pass treats both alike.
#ifndef MEGAC_TX_GRAD_OPS_TD
#define MEGAC_TX_GRAD_OPS_TD

include "tx/TxBase.td"
include "tx/TxInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Tx_ParamGradOp : Tx_Op<"param_grad", [Tx_ShardingRule, MemoryEffects<[MemWrite]>, AllTypesMatch<["param", "grad"]>]> {
  let summary = "adds a gradient into a parameter's gradient buffer";
  let description = [{
    `param` is the value of a `tx.param`; `grad` is added to that parameter's gradient
    buffer (gradients accumulate over the microbatches of an iteration).
  }];
  let arguments = (ins Tx_FloatTensor:$param, Tx_FloatTensor:$grad);
  let assemblyFormat = "$grad `to` $param attr-dict `:` type($param)";
  let hasVerifier = 1;
}

def Tx_ZerosOp : Tx_Op<"zeros", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure]> {
  let summary = "a tensor of zeros (the cotangent of an unused value)";
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Tx_ReduceSumOp : Tx_Op<"reduce_sum", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure]> {
  let summary = "sum over leading dimensions; the result is a trailing part of the input's shape";
  let description = [{
    The gradient of a broadcast: summing `[B, S, N]` to `[N]` adds up a bias's gradient.
  }];
  let arguments = (ins Tx_FloatTensor:$input);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Tx_PadOp : Tx_Op<"pad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure]> {
  let summary = "places `input` at `offset` along `dim` of a zero tensor (the gradient of tx.slice)";
  let arguments = (ins Tx_FloatTensor:$input, I64Attr:$dim, I64Attr:$offset);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$input `dim` $dim `offset` $offset attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Tx_EmbeddingGradOp : Tx_Op<"embedding_grad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure]> {
  let summary = "gradient of an embedding table: rows of `grad` summed by token id";
  let description = [{
    With `vocab_parallel`, the result is this tensor-parallel rank's share of the vocabulary
    (see tx.embedding); ids outside it contribute nothing.
  }];
  let arguments = (ins Tx_FloatTensor:$grad, Tx_IdTensor:$ids, UnitAttr:$vocab_parallel);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $ids (`vocab_parallel` $vocab_parallel^)? attr-dict `:` type($grad) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tx_LayerNormGradOp : Tx_Op<"layer_norm_grad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, AllTypesMatch<["grad", "input", "input_grad"]>,
                                                    AllTypesMatch<["weight", "weight_grad", "bias_grad"]>]> {
  let summary = "gradients of tx.layer_norm: input, weight and bias (statistics recomputed from input)";
  let arguments = (ins Tx_FloatTensor:$grad, Tx_FloatTensor:$input, Tx_FloatTensor:$weight, F64Attr:$epsilon);
  let results = (outs Tx_FloatTensor:$input_grad, Tx_FloatTensor:$weight_grad, Tx_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight `eps` $epsilon attr-dict `:` type($grad) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Tx_RmsNormGradOp : Tx_Op<"rms_norm_grad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, AllTypesMatch<["grad", "input", "input_grad"]>,
                                                AllTypesMatch<["weight", "weight_grad"]>]> {
  let summary = "gradients of tx.rms_norm: input and weight";
  let arguments = (ins Tx_FloatTensor:$grad, Tx_FloatTensor:$input, Tx_FloatTensor:$weight, F64Attr:$epsilon,
                       OptionalAttr<F64Attr>:$weight_offset);
  let results = (outs Tx_FloatTensor:$input_grad, Tx_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight `eps` $epsilon (`weight_offset` $weight_offset^)? attr-dict `:` type($grad) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Tx_GeluGradOp : Tx_Op<"gelu_grad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, AllTypesMatch<["grad", "input", "result"]>]> {
  let summary = "gradient of tx.gelu";
  let arguments = (ins Tx_FloatTensor:$grad, Tx_FloatTensor:$input, Tx_GeluApproximation:$approximation);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input ` ` `(` $approximation `)` attr-dict `:` type($grad)";
}

def Tx_SwigluGradOp : Tx_Op<"swiglu_grad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, AllTypesMatch<["grad", "gate", "up", "gate_grad", "up_grad"]>]> {
  let summary = "gradients of tx.swiglu: gate and up";
  let arguments = (ins Tx_FloatTensor:$grad, Tx_FloatTensor:$gate, Tx_FloatTensor:$up);
  let results = (outs Tx_FloatTensor:$gate_grad, Tx_FloatTensor:$up_grad);
  let assemblyFormat = "$grad `,` $gate `,` $up attr-dict `:` type($grad)";
}

def Tx_AttentionGradOp : Tx_Op<"attention_grad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, AllTypesMatch<["grad", "query", "query_grad"]>,
                                                  AllTypesMatch<["key", "value", "key_grad", "value_grad"]>,
                                                  DeclareOpInterfaceMethods<Tx_AttentionOpInterface>]> {
  let summary = "gradients of tx.attention: query, key, value (probabilities recomputed)";
  let arguments = (ins Tx_FloatTensor:$grad, Tx_FloatTensor:$query, Tx_FloatTensor:$key,
                       Tx_FloatTensor:$value, UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                       F64Attr:$scale, OptionalAttr<F64Attr>:$dropout);
  let results = (outs Tx_FloatTensor:$query_grad, Tx_FloatTensor:$key_grad, Tx_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value (`causal` $causal^)? (`window` $window^)? `scale` $scale (`dropout` $dropout^)? attr-dict
    `:` type($query) `,` type($key)
  }];
  let hasVerifier = 1;
}

def Tx_CrossEntropyGradOp : Tx_Op<"cross_entropy_grad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure, AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of tx.cross_entropy with respect to the logits";
  let arguments = (ins Tx_FloatScalar:$grad, Tx_FloatTensor:$logits, Tx_IdTensor:$labels,
                       OptionalAttr<I64Attr>:$vocab_size, OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $logits `,` $labels (`vocab_size` $vocab_size^)? (`ignore_index` $ignore_index^)? attr-dict
    `:` type($grad) `,` type($logits) `,` type($labels)
  }];
  let hasVerifier = 1;
}

#endif // MEGAC_TX_GRAD_OPS_TD
