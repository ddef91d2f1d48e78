// Mixture of experts: routing tokens to experts, moving their rows to and from expert order, and
// the experts' grouped GEMM; with the ops their gradients are made of.
//
// A layer's MLP as experts (Mixtral's, Megatron's MoELayer, dropless):
//   %probs, %experts, %weights = tx.moe_route %logits topk 2    // [T, E] -> [T, E], [T, k], [T, k]
//   %rows, %counts = tx.moe_assign %experts                      // where each (token, choice) goes
//   %x_e = tx.moe_scatter %x, %rows                              // [T, H] -> [T k, H], expert order
//   %h_e = tx.grouped_matmul %x_e, %w1, %counts transpose_rhs    // each expert's rows, its weight
//   ...
//   %y = tx.moe_gather %y_e, %rows, %weights                     // [T k, H] -> [T, H], weighted sum
#ifndef MEGAC_TX_MOE_OPS_TD
#define MEGAC_TX_MOE_OPS_TD

include "tx/TxBase.td"
include "tx/TxInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Tx_IndexTensor : StaticShapeTensorOf<[I32]>;

def Tx_MoeRouteOp : Tx_Op<"moe_route", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                        DeclareOpInterfaceMethods<Tx_VjpOpInterface>,
                                        AllTypesMatch<["logits", "probs"]>]> {
  let summary = "a router's top-k choice of experts per token, and their weights";
  let description = [{
    `logits` is `[tokens, experts]`. `probs` is their softmax over the experts; `experts` the
    `topk` most probable per token, most probable first, the lower expert index first among
    equal probabilities; `weights` their probabilities renormalised to sum to 1 (a softmax over
    the top k: Mixtral's, Megatron's default) or, with `pre_softmax`, as they are (Qwen2-MoE's
    norm_topk_prob false, Megatron's moe_router_pre_softmax).
  }];
  let arguments = (ins Tx_FloatTensor:$logits, I64Attr:$topk, UnitAttr:$pre_softmax);
  let results = (outs Tx_FloatTensor:$probs, Tx_IndexTensor:$experts, Tx_FloatTensor:$weights);
  let assemblyFormat = [{
    $logits `topk` $topk (`pre_softmax` $pre_softmax^)? attr-dict `:` type($logits) `->` type($experts) `,` type($weights)
  }];
  let hasVerifier = 1;
}

def Tx_MoeDropOp : Tx_Op<"moe_drop", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                      DeclareOpInterfaceMethods<Tx_VjpOpInterface>,
                                      AllTypesMatch<["experts", "kept"]>, AllTypesMatch<["weights", "mask"]>]> {
  let summary = "token dropping: each expert keeps at most `capacity` of its choices (Megatron's capacity factor)";
  let description = [{
    `experts` and `weights` are tx.moe_route's `[tokens, k]`. Each expert keeps `capacity` of the
    choices that name it: the most probable (policy `probs`; among equal weights the earlier
    token) or the earliest tokens' (`position`); the others are dropped. `kept` is `experts` with
    -1 for a dropped choice (tx.moe_assign puts it after every expert's rows, uncounted), `mask` 1
    for a kept choice and 0 for a dropped one: the frontend multiplies the weights by it, so a
    dropped choice adds nothing and gets no gradient. The choice itself has no gradient.
  }];
  let arguments = (ins Tx_IndexTensor:$experts, Tx_FloatTensor:$weights, I64Attr:$capacity, I64Attr:$num_experts,
                       UnitAttr:$by_position);
  let results = (outs Tx_IndexTensor:$kept, Tx_FloatTensor:$mask);
  let assemblyFormat = [{
    $experts `,` $weights `capacity` $capacity `of` $num_experts `experts` (`by_position` $by_position^)? attr-dict
    `:` type($experts) `,` type($weights)
  }];
  let hasVerifier = 1;
}

def Tx_MoeAssignOp : Tx_Op<"moe_assign", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                          AllTypesMatch<["experts", "rows"]>]> {
  let summary = "each (token, choice)'s row in expert order, and the rows of each expert";
  let description = [{
    `experts` is `[tokens, k]` (tx.moe_route's). The `tokens x k` choices are ordered by expert,
    then by token, then by choice: `rows[t, j]` is the place of token t's j-th choice in that
    order and `counts[e]` the choices of expert e (`counts` has one entry per expert). A choice
    tx.moe_drop dropped (-1) is placed after every expert's rows and not counted. Neither result
    has a gradient.
  }];
  let arguments = (ins Tx_IndexTensor:$experts);
  let results = (outs Tx_IndexTensor:$rows, Tx_IndexTensor:$counts);
  let assemblyFormat = "$experts attr-dict `:` type($experts) `->` type($counts)";
  let hasVerifier = 1;
}

def Tx_MoeScatterOp : Tx_Op<"moe_scatter", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                            DeclareOpInterfaceMethods<Tx_VjpOpInterface>]> {
  let summary = "token rows copied to their choices' rows in expert order (times a weight)";
  let description = [{
    `input` is `[tokens, hidden]`, `rows` tx.moe_assign's `[tokens, k]`; the result is
    `[tokens x k, hidden]` with `result[rows[t, j]] = input[t]`, times `weights[t, j]` when
    given (the gradient of tx.moe_gather).
  }];
  let arguments = (ins Tx_FloatTensor:$input, Tx_IndexTensor:$rows, Optional<Tx_FloatTensor>:$weights);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $rows (`weights` $weights^ `:` type($weights))? attr-dict `:` type($input) `,` type($rows) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tx_MoeGatherOp : Tx_Op<"moe_gather", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                          DeclareOpInterfaceMethods<Tx_VjpOpInterface>]> {
  let summary = "each token's choices' rows summed back into its row (weighted by the router)";
  let description = [{
    `input` is `[tokens x k, hidden]` in expert order, `rows` tx.moe_assign's `[tokens, k]`; the
    result is `[tokens, hidden]` with `result[t] = sum over j of weights[t, j] * input[rows[t, j]]`
    (weights 1 when not given: the gradient of tx.moe_scatter), j in order.
  }];
  let arguments = (ins Tx_FloatTensor:$input, Tx_IndexTensor:$rows, Optional<Tx_FloatTensor>:$weights);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $rows (`weights` $weights^ `:` type($weights))? attr-dict `:` type($input) `,` type($rows) `->` type($result)
  }];
  let hasVerifier = 1;
}

// ---- expert parallelism (megac-expert-parallel) ----------------------------------------------
// Over the `ranks` expert-parallel ranks of the rank's group (StepContext::ep): each holds
// experts / ranks consecutive experts, and the rows in expert order travel to the rank that holds
// their expert and back. Rank r's rows of its local expert e arrive as segment s * local + e of
// the received rows, s the sending rank; a grouped GEMM over them takes the received counts.

def Tx_MoeExchangeCountsOp : Tx_Op<"moe_exchange_counts", [Tx_KernelCall, Tx_ShardingRule, Pure, AllTypesMatch<["counts", "received"]>]> {
  let summary = "each expert-parallel rank's counts of this rank's experts: an all-to-all of the counts";
  let description = [{
    `counts` is tx.moe_assign's (one per expert, all experts). `received[s * local + e]` is how
    many rows rank s has for this rank's local expert e (local = experts / ranks): the counts of
    the rows tx.moe_dispatch brings. No gradient.
  }];
  let arguments = (ins Tx_IndexTensor:$counts, I64Attr:$ranks);
  let results = (outs Tx_IndexTensor:$received);
  let assemblyFormat = "$counts `over` $ranks `ranks` attr-dict `:` type($counts)";
  let hasVerifier = 1;
}

def Tx_MoeDispatchOp : Tx_Op<"moe_dispatch", [Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>,
                                              AllTypesMatch<["counts", "received"]>]> {
  let summary = "rows in expert order sent to the expert-parallel ranks that hold their experts (all-to-all)";
  let description = [{
    `input` is `[tokens x k, hidden]` in expert order with tx.moe_assign's `counts`; `received`
    tx.moe_exchange_counts's. The result holds the rows of this rank's experts from every rank,
    sender by sender, each sender's in expert order, then zeros: `[ranks x capacity, hidden]`, a
    capacity (rows one rank can send another) that dropless routing never exceeds. Its gradient
    is tx.moe_combine.
  }];
  let arguments = (ins Tx_FloatTensor:$input, Tx_IndexTensor:$counts, Tx_IndexTensor:$received, I64Attr:$ranks);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $counts `,` $received `over` $ranks `ranks` attr-dict `:` type($input) `,` type($counts) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tx_MoeCombineOp : Tx_Op<"moe_combine", [Tx_KernelCall, Tx_ShardingRule, Pure, DeclareOpInterfaceMethods<Tx_VjpOpInterface>,
                                            AllTypesMatch<["counts", "received"]>]> {
  let summary = "the experts' output rows sent back to the ranks their tokens came from (all-to-all)";
  let description = [{
    The inverse of tx.moe_dispatch: `input` `[ranks x capacity, hidden]` laid out as its result,
    the result `[tokens x k, hidden]` in this rank's expert order. Its gradient is tx.moe_dispatch.
  }];
  let arguments = (ins Tx_FloatTensor:$input, Tx_IndexTensor:$counts, Tx_IndexTensor:$received, I64Attr:$ranks);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $counts `,` $received `over` $ranks `ranks` attr-dict `:` type($input) `,` type($counts) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tx_GroupedMatmulOp : Tx_Op<"grouped_matmul", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                                  DeclareOpInterfaceMethods<Tx_VjpOpInterface>,
                                                  DeclareOpInterfaceMethods<Tx_GemmOpInterface>]> {
  let summary = "each expert's rows times its own weight: one grouped GEMM";
  let description = [{
    `lhs` is `[rows, K]` in expert order, `rhs` the experts' weights `[experts, K, N]`
    (`[experts, N, K]` with `transpose_rhs`: Hugging Face's Linear layout) and `counts`
    tx.moe_assign's rows per expert: expert e's `counts[e]` rows, after those of the experts
    before it, are multiplied by `rhs[e]`. The result is `[rows, N]`. Under expert parallelism
    `counts` (tx.moe_exchange_counts's) has a multiple of the experts: segment s's rows go
    through `rhs[s mod experts]`, and rows past the counted ones are zero.
  }];
  let arguments = (ins Tx_FloatTensor:$lhs, Tx_FloatTensor:$rhs, Tx_IndexTensor:$counts, UnitAttr:$transpose_rhs);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $counts (`transpose_rhs` $transpose_rhs^)? attr-dict
    `:` type($lhs) `,` type($rhs) `,` type($counts) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tx_GateRowsOp : Tx_Op<"gate_rows", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                        DeclareOpInterfaceMethods<Tx_VjpOpInterface>,
                                        AllTypesMatch<["input", "result"]>]> {
  let summary = "each row times the sigmoid of its gate: result[t] = input[t] x sigmoid(gate[t, 0])";
  let description = [{
    `input` is `[tokens, hidden]`, `gate` `[tokens, 1]` (a GEMM's logits): Qwen2-MoE's shared expert,
    whose output each token scales by sigmoid(x . shared_expert_gate).
  }];
  let arguments = (ins Tx_FloatTensor:$input, Tx_FloatTensor:$gate);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gate attr-dict `:` type($input) `,` type($gate)";
  let hasVerifier = 1;
}

def Tx_RouterLoadOp : Tx_Op<"router_load", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                            DeclareOpInterfaceMethods<Tx_VjpOpInterface>]> {
  let summary = "a router's load: the choices of each expert and the probability it got in all";
  let description = [{
    `probs` is tx.moe_route's `[tokens, experts]`, `counts` tx.moe_assign's. The result is
    `[2, experts]`: row 0 the counts (as numbers; they have no gradient), row 1 each expert's
    probabilities summed over the tokens. A layer adds its load to the sum it carries (the
    load-balancing loss of all layers' routing at once, transformers').
  }];
  let arguments = (ins Tx_FloatTensor:$probs, Tx_IndexTensor:$counts);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$probs `,` $counts attr-dict `:` type($probs) `,` type($counts) `->` type($result)";
  let hasVerifier = 1;
}

def Tx_LoadBalancingLossOp : Tx_Op<"load_balancing_loss", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                                          DeclareOpInterfaceMethods<Tx_VjpOpInterface>]> {
  let summary = "the Switch Transformer's load-balancing loss of a router load: scale x sum_e count_e x prob_e";
  let description = [{
    `load` is tx.router_load's `[2, experts]` (or a sum of several). `scale` holds the rest of the
    definition: transformers' load_balancing_loss_func is experts / (tokens x layers)^2 over all
    layers' loads summed; Megatron's per-layer aux loss experts / (tokens^2 x top k) over each
    layer's. The gradient reaches the probabilities only.
  }];
  let arguments = (ins Tx_FloatTensor:$load, F64Attr:$scale);
  let results = (outs Tx_FloatScalar:$result);
  let assemblyFormat = "$load `scale` $scale attr-dict `:` type($load) `->` type($result)";
  let hasVerifier = 1;
}

def Tx_RouterZLossOp : Tx_Op<"router_z_loss", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                              DeclareOpInterfaceMethods<Tx_VjpOpInterface>]> {
  let summary = "a router's z-loss: the mean over the tokens of logsumexp(logits)^2 (ST-MoE, Megatron's)";
  let arguments = (ins Tx_FloatTensor:$logits);
  let results = (outs Tx_FloatScalar:$result);
  let assemblyFormat = "$logits attr-dict `:` type($logits) `->` type($result)";
  let hasVerifier = 1;
}

def Tx_AddLossOp : Tx_Op<"add_loss", [MemoryEffects<[MemWrite]>]> {
  let summary = "adds `coefficient` x a scalar to what training minimises, beside the returned loss";
  let description = [{
    The model's function returns the loss it reports (the language model's); an auxiliary loss
    (a router's load balancing) joins the objective here: megac-autodiff seeds its cotangent with
    `coefficient` times the returned loss's, and removes the op. Only in the model's function.
  }];
  let arguments = (ins Tx_FloatScalar:$loss, F64Attr:$coefficient);
  let assemblyFormat = "$loss `times` $coefficient attr-dict `:` type($loss)";
}

def Tx_MetricOp : Tx_Op<"metric", [Tx_KernelCall, Tx_ShardingRule, MemoryEffects<[MemWrite]>]> {
  let summary = "reports a scalar of each microbatch under a name (the mean over the iteration is logged)";
  let description = [{
    Training's log line, metrics file and TensorBoard show `metric` beside the language model's
    loss: its mean over the iteration's microbatches (and data-parallel ranks); evaluation's, over
    the evaluated batches. It changes nothing the program computes and has no gradient.
  }];
  let arguments = (ins Tx_FloatScalar:$value, Tx_Metric:$metric);
  let assemblyFormat = "$metric $value attr-dict `:` type($value)";
}

def Tx_RecordExpertLoadOp : Tx_Op<"record_expert_load", [Tx_KernelCall, Tx_ShardingRule, MemoryEffects<[MemWrite]>]> {
  let summary = "reports how many token choices each expert of this layer computed (the load histogram)";
  let description = [{
    `counts` is tx.moe_assign's `[experts]` (the choices kept, after any drops). The training log's
    metrics file shows, per iteration, every layer's counts summed over the iteration's
    microbatches and data-parallel ranks: the layer is the one whose function runs
    (StepContext::layer), and a recomputed layer's rerun records nothing. It changes nothing the
    program computes and has no gradient.
  }];
  let arguments = (ins Tx_IndexTensor:$counts);
  let assemblyFormat = "$counts attr-dict `:` type($counts)";
  let hasVerifier = 1;
}

// ---- gradients --------------------------------------------------------------------------------

def Tx_LoadBalancingLossGradOp : Tx_Op<"load_balancing_loss_grad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule,
                                                                   Pure, AllTypesMatch<["load", "result"]>]> {
  let summary = "gradient of tx.load_balancing_loss: the probability row's, scale x grad x counts (0 for the counts)";
  let arguments = (ins Tx_FloatScalar:$grad, Tx_FloatTensor:$load, F64Attr:$scale);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $load `scale` $scale attr-dict `:` type($grad) `,` type($load)";
}

def Tx_GateRowsGradOp : Tx_Op<"gate_rows_grad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                                AllTypesMatch<["grad", "input", "input_grad"]>,
                                                AllTypesMatch<["gate", "gate_grad"]>]> {
  let summary = "gradients of tx.gate_rows: the rows' (grad x s) and the gates' (s (1 - s) grad . input)";
  let arguments = (ins Tx_FloatTensor:$grad, Tx_FloatTensor:$input, Tx_FloatTensor:$gate);
  let results = (outs Tx_FloatTensor:$input_grad, Tx_FloatTensor:$gate_grad);
  let assemblyFormat = "$grad `,` $input `,` $gate attr-dict `:` type($grad) `,` type($gate)";
}

def Tx_RouterZLossGradOp : Tx_Op<"router_z_loss_grad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                                      AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of tx.router_z_loss: grad x 2 logsumexp(l) softmax(l) / tokens";
  let arguments = (ins Tx_FloatScalar:$grad, Tx_FloatTensor:$logits);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $logits attr-dict `:` type($grad) `,` type($logits)";
}

def Tx_RouterLoadGradOp : Tx_Op<"router_load_grad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure]> {
  let summary = "gradient of tx.router_load for the probabilities: row 1 of `grad` for every token";
  let arguments = (ins Tx_FloatTensor:$grad);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($result)";
  let hasVerifier = 1;
}

def Tx_MoeRouteGradOp : Tx_Op<"moe_route_grad", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure,
                                                AllTypesMatch<["probs_grad", "probs", "result"]>,
                                                AllTypesMatch<["weights_grad", "weights"]>]> {
  let summary = "gradient of tx.moe_route with respect to the logits";
  let description = [{
    From the cotangents of its probabilities and weights, and its results; the choice of experts
    has none.
  }];
  let arguments = (ins Tx_FloatTensor:$probs_grad, Tx_FloatTensor:$weights_grad, Tx_FloatTensor:$probs,
                       Tx_IndexTensor:$experts, Tx_FloatTensor:$weights, UnitAttr:$pre_softmax);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $probs_grad `,` $weights_grad `,` $probs `,` $experts `,` $weights (`pre_softmax` $pre_softmax^)? attr-dict
    `:` type($probs) `,` type($weights) `,` type($experts)
  }];
  let hasVerifier = 1;
}

def Tx_MoeRowDotOp : Tx_Op<"moe_row_dot", [Tx_ReferenceEval, Tx_KernelCall, Tx_ShardingRule, Pure]> {
  let summary = "result[t, j] = tokens[t] . rows_in_expert_order[rows[t, j]] (a routing weight's gradient)";
  let arguments = (ins Tx_FloatTensor:$tokens, Tx_FloatTensor:$expert_rows, Tx_IndexTensor:$rows);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $tokens `,` $expert_rows `,` $rows attr-dict `:` type($tokens) `,` type($expert_rows) `,` type($rows) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tx_GroupedMatmulWeightGradOp : Tx_Op<"grouped_matmul_weight_grad", [Tx_ReferenceEval, Tx_KernelCall,
                                                                      Tx_ShardingRule, Pure,
                                                                      DeclareOpInterfaceMethods<Tx_GemmOpInterface>]> {
  let summary = "each expert's weight gradient from its rows: lhs_e^T grad_e (grad_e^T lhs_e with transpose)";
  let description = [{
    `lhs` `[rows, K]` and `grad` `[rows, N]` in expert order with tx.moe_assign's `counts`; the
    result is `[experts, K, N]`, or `[experts, N, K]` with `transpose` (a `transpose_rhs`
    tx.grouped_matmul's weight). An expert with no rows gets zeros; with more segments than
    experts (expert parallelism), each expert's segments are summed.
  }];
  let arguments = (ins Tx_FloatTensor:$lhs, Tx_FloatTensor:$grad, Tx_IndexTensor:$counts, UnitAttr:$transpose);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $grad `,` $counts (`transpose` $transpose^)? attr-dict
    `:` type($lhs) `,` type($grad) `,` type($counts) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // MEGAC_TX_MOE_OPS_TD
