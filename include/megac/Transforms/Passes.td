// megac's passes, in the order `megac compile` runs them (buildTrainingPipeline,
// megac-opt --megac-training-pipeline, adds a cse after megac-autodiff and
// megac-pipeline-schedule after megac-pipeline-split).
#ifndef MEGAC_TRANSFORMS_PASSES_TD
#define MEGAC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def Lora : Pass<"megac-lora", "mlir::ModuleOp"> {
  let summary = "LoRA: freezes the model and adds low-rank adapters to its linear layers (megac compile --lora-rank)";
  let description = [{
    Runs first, on the frontend's forward, with the plan's `lora_*` keys (`@grid`'s
    `megac.plan`); does nothing without them. Every `tx.param` becomes `frozen` (no gradient,
    no optimizer state: PEFT's base model). On each module of `lora_target_modules` of the layer
    function (`attn.c_attn`, `self_attn.q_proj`, ...) the base product y = x W (+ bias) gets
    PEFT's adapter: `y + ((dropout(x) A^T) B^T) * scaling`, scaling = lora_alpha / lora_rank
    (lora_alpha / sqrt(lora_rank) with `use_rslora`), the scaling the second GEMM's `scale`.
    A [r, in] and B [out, r] are new trainable parameters named as PEFT saves them
    (`base_model.model.<module path>.lora_A.weight`), A initialised kaiming-uniform(a = sqrt 5),
    B zeros, so training starts from the base model. GPT-2's fused c_attn keeps one A and splits
    B into the q, k and v blocks of the fused output, as its weight is split.

    Tensor parallelism places the adapters with their base layer: under a column-parallel base
    B is split on its output (A whole); under a row-parallel base A is split on its input (B
    whole), so x A^T is a partial sum, reduced before B.
  }];
  let dependentDialects = ["::megac::tx::TxDialect", "::mlir::func::FuncDialect", "::megac::MegacDialect"];
}

def Autocast : Pass<"megac-autocast", "mlir::ModuleOp"> {
  let summary = "16-bit activations by autocast rules (megac compile --bf16 / --fp16)";
  let description = [{
    Runs on the frontend's forward, before megac-autodiff, with the plan's
    `activation_precision` (`@grid`'s `megac.plan`); does nothing without it (fp32).

    The rule: what is computed from the data is stored in 16 bits, what is computed from the
    parameters alone stays fp32, and so does the loss. So the embedding's output, every GEMM's
    and norm's output, attention, the residual stream and the logits become bf16 (f16); the
    parameters stay fp32 (they are the master weights: a GEMM rounds its fp32 operand to 16
    bits as autocast casts it), and the cross-entropy reads 16-bit logits and returns an fp32
    loss, its softmax statistics in fp32. megac-autodiff then types every gradient as its
    primal: activation gradients 16-bit, parameter gradients fp32 (the weight-gradient GEMMs
    accumulate in fp32, the bias gradients are summed in fp32). A layer function's arguments and
    results take the types of its call.
  }];
  let dependentDialects = ["::megac::tx::TxDialect", "::mlir::func::FuncDialect", "::megac::MegacDialect"];
}

def ExpertParallel : Pass<"megac-expert-parallel", "mlir::ModuleOp"> {
  let summary = "Splits the experts over the expert-parallel ranks; their rows travel all-to-all";
  let description = [{
    Runs on the forward, before megac-autodiff, with the plan's `expert_model_parallel_size` ep
    (nothing to do at ep 1). Each expert weight (`role expert_weight`, stacked `[experts, ...]`)
    becomes the block of experts / ep consecutive experts that ep rank 0 holds (rank r's starts r x
    experts / ep further; ep rank = dp rank mod ep, Megatron's expert rank order), and the
    functions that take them get the new types. Between a layer's `tx.moe_scatter` (its tokens'
    rows in expert order) and its `tx.moe_gather`, the rows travel to the ranks that hold their
    experts and back: `tx.moe_exchange_counts` tells each rank how many rows of its experts every
    rank sends, `tx.moe_dispatch` sends them (an all-to-all over the ep group), the grouped GEMMs
    and the ops between them run on the received rows with the received counts, and
    `tx.moe_combine` returns the results in the order they came. The received rows are sized for
    the most dropless routing can send: ep x one dp rank's tokens x min(top k, experts / ep) (the
    frontend's batch is every dp rank's; megac-shard-localize keeps the received rows as they are). Autodiff derives
    the backward (each exchange's gradient is the other one); megac-data-parallel sums the
    experts' gradients over the ranks that hold the same experts.
  }];
  let dependentDialects = ["::megac::tx::TxDialect", "::mlir::func::FuncDialect", "::megac::MegacDialect"];
}

def Autodiff : Pass<"megac-autodiff", "mlir::ModuleOp"> {
  let summary = "Builds the backward pass: forward + backward of one microbatch";
  let description = [{
    Differentiates the entry function `@forward(ids, labels) -> loss` with respect to every
    `tx.param`, walking its ops last to first and asking each op for its vector-Jacobian
    product (`VjpOpInterface`). The entry becomes `@train_step(ids, labels, dloss) -> loss`:
    `dloss` seeds the backward pass (the runtime passes 1 / (microbatches x dp size)) and each
    parameter's gradient flows into a `tx.param_grad`.

    A function called from the entry (one per distinct layer kind) is split into `@F_forward`,
    which also returns the activations its backward needs, and `@F_backward`, which takes them
    with the cotangents of F's results and returns the cotangents of F's arguments. So the
    program keeps one function per layer kind, and a later pass can place the halves on
    different pipeline stages.
  }];
  let options = [
    Option<"entry", "entry", "std::string", "::megac::names::kForwardEntry.str()",
           "name of the function to differentiate">,
  ];
  let dependentDialects = ["::megac::tx::TxDialect", "::mlir::func::FuncDialect", "::megac::MegacDialect"];
}

def Recompute : Pass<"megac-recompute", "mlir::ModuleOp"> {
  let summary = "Activation recomputation: stashes less, reruns forward ops in backward (Megatron's full and selective)";
  let description = [{
    Runs after megac-autodiff, with the plan's `recompute_*` keys (`@grid`'s `megac.plan`); does
    nothing without them. Recomputation never changes a number: the rerun ops are the forward's
    own, on the same inputs.

    Full (`recompute_granularity = "full"`): whole layers rerun in backward. The layers of each
    pipeline chunk form groups (`recompute_method = "uniform"`: groups of `recompute_num_layers`
    consecutive layers; `"block"`: each of the chunk's first `recompute_num_layers` layers alone,
    the others not recomputed). A recomputed layer's forward calls `@F_forward_only`, which
    returns the layer's output and saves nothing; just before the backward of a group's last
    layer, `@train_step` calls `@F_forward` again for each layer of the group (`megac.recompute`
    = the layer's index) from the group's input, the one activation the forward keeps, and the
    group's backward calls read what those calls saved. With `distribute_saved_activations` the
    group's first rerun carries `megac.distribute_saved`: megac-tensor-parallel then keeps the
    group's input split over tp between the forward and the rerun.

    Selective (`recompute_granularity = "selective"`, `recompute_modules`): inside every layer.
    `mlp`: the activations the MLP saves (the pre-activation and the activation: GELU's input and
    output, SwiGLU's gate, up and output); `layernorm`: the norms' outputs. `@F_forward` stops
    returning them and `@F_backward` recomputes each just before its first use (ops marked
    `megac.recomputed`; the function's `megac.recomputed` lists the activations), from the forward
    arguments (`megac.forward_args`) and the activations still saved. `core_attn` recomputes
    nothing here: the attention already keeps no s x s term (its backward recomputes the scores
    from q, k and v), and its output feeds the output projection, which keeps it as in Megatron.
  }];
  let dependentDialects = ["::megac::tx::TxDialect", "::mlir::func::FuncDialect", "::megac::MegacDialect"];
}

def TensorParallel : Pass<"megac-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Shards forward + backward over the tensor-parallel ranks, Megatron's way";
  let description = [{
    Runs after megac-autodiff, with the tensor-parallel size and sequence parallelism of the
    plan recorded in `@grid` (nothing to do at tp 1). The sharding rules are the ops' own
    (`ShardingRuleOpInterface`, dialects/tx/TxSharding.cpp), each named after the Megatron rule
    it implements: a parameter is split by the role the frontend gave it (query / key / value,
    fc1, gate and up column-parallel; attention output, fc2 and down row-parallel; embedding and
    LM head vocabulary-parallel; norms and positions whole), and every value then gets a
    sharding - whole, split along one dimension, or a partial sum - from its operands', forward
    and backward ops alike. Where an op needs another sharding than its operand has, the pass
    inserts the collective on the `tp` axis of `@grid` (a `shard.grid` of shape pp x dp x tp,
    Megatron's rank order) and names the rule in `megac.rule`: a partial sum that meets a norm,
    a residual add or a bias becomes an all-reduce (two per layer forward, two backward), the
    cross-entropy over vocabulary-split logits is built from three all-reduced statistics, and
    an embedding over a vocabulary-split table gives a partial sum. Types become the rank-local
    shapes, and every value records its sharding (`megac.sharding = #tx.sharding<...>` on each
    op, one per result, and on function arguments and results).

    With `sequence_parallel` in the plan, activations between the tensor-parallel regions stay
    split along the sequence: partial sums of a row-parallel layer are reduce-scattered instead
    of all-reduced, column-parallel layers all-gather their input, norms work on the local
    sequence shard, and the gradients of the norms' weights and of the row-parallel biases are
    all-reduced over tp, each under its own rule.
  }];
  let dependentDialects = ["::megac::tx::TxDialect", "::mlir::func::FuncDialect", "::mlir::shard::ShardDialect",
                           "::megac::MegacDialect"];
}

def PipelineSplit : Pass<"megac-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Cuts forward + backward into per-chunk forward and backward functions";
  let description = [{
    The transformer layers are split into chunks (pp x vpp of them; chunk c runs on pipeline rank
    c % pp); the plan's `pipeline_layout` (`@grid`) gives each chunk's number of consecutive
    layers. Without pipeline parallelism there is one chunk holding every layer: every plan's
    iteration is a schedule of chunk functions, run by the runtime's one executor. The embedding
    goes to the first chunk; the final norm, LM head and loss to the last. `@train_step` is
    replaced by, for every chunk c,

      @chunk<c>_forward(ids, labels[, input]) -> (output | loss, stash...)
      @chunk<c>_backward(ids, labels, dloss, stash...[, output_grad]) -> ([input_grad])

    where input / output are the residual stream passed between neighbouring chunks (and
    output_grad / input_grad its gradient), and the stash is what the backward reads of the
    forward. What the layers carry besides the residual stream (a mixture of experts' router
    load) travels with it: several values are packed into one flat tensor (`boundary_out`:
    flattened, padded to their places, added) and unpacked on arrival (`boundary_in`: sliced,
    reshaped), their gradients likewise, so the runtime sends one buffer each way. Parameters are cloned into every chunk that uses them; a gradient that is a sum of
    contributions from different chunks (a weight tied between the first and last chunk) becomes
    one `tx.param_grad` per chunk, and the runtime sums the stages' copies. Each chunk function
    carries `megac.chunk` (its chunk) and `megac.stash` (the number of values its forward stashes).
  }];
  let dependentDialects = ["::megac::tx::TxDialect", "::mlir::func::FuncDialect", "::megac::MegacDialect"];
}

def DataParallel : Pass<"megac-data-parallel", "mlir::ModuleOp"> {
  let summary = "Adds @sync_gradients: the data-parallel gradient all-reduce, in flat buckets";
  let description = [{
    With dp > 1 in the plan (`@grid`), each data-parallel rank runs its share of the global batch,
    and before the optimizer step the gradients are summed over the dp axis of `@grid`. Like
    Megatron's distributed data parallel, the gradients are grouped into flat buckets of at most
    the plan's `ddp_bucket_size` elements, walking the parameter table from the last parameter to the first
    (the order in which backward produces them), and each bucket is one `shard.all_reduce`.
    After megac-pipeline-split, each pipeline stage gets its own `@sync_gradients_stage<s>` over
    its own parameter table.

    With `overlap_grad_reduce` in the plan, each bucket also gets a `tx.start_grad_sync` right after the
    last `tx.param_grad` of its parameters (moved up to where their gradients are made), in
    `@train_step` or, with pipeline stages, in the chunk backward that makes them (buckets then
    end at chunk boundaries): the runtime starts the bucket's all-reduce there on the
    iteration's last microbatch (a chunk's last backward), overlapping the rest of backward.
  }];
  let dependentDialects = ["::megac::tx::TxDialect", "::mlir::func::FuncDialect", "::mlir::shard::ShardDialect",
                           "::megac::MegacDialect"];
}

def FuseEpilogues : Pass<"megac-fuse-epilogues", "mlir::ModuleOp"> {
  let summary = "Folds a linear layer's bias add into its GEMM call (and the GELU after it into the same call)";
  let description = [{
    After autodiff and the parallel passes: `tx.matmul %x, %w` (a weight matrix) whose only user
    is `tx.add` of a bias vector becomes `tx.matmul_bias`; when that sum's only other use is
    the saved pre-activation and a `tx.gelu` reads it, `tx.matmul_bias_gelu` produces both. The
    GEMM's epilogue adds the bias (cuBLASLt's bias epilogue on CUDA) instead of a separate kernel
    reading and writing the whole activation again; the GELU follows in the same call (our
    kernel: cuBLASLt does not document which GELU its epilogue computes).
  }];
  let dependentDialects = ["::megac::tx::TxDialect"];
}

def FuseNf4Loads : Pass<"megac-fuse-nf4-loads", "mlir::ModuleOp"> {
  let summary = "QLoRA: each GEMM reads its NF4 weight directly, dequantizing it in the operand load";
  let description = [{
    Last: `tx.matmul %x, %w_dequantized` whose `%w_dequantized = tx.nf4_dequantize %w`
    becomes `tx.matmul_nf4 %x, %w`, and the `tx.nf4_dequantize` goes once nothing reads it. The
    GEMM dequantizes the weight a tile at a time (megart::cpu::gemm_nf4) instead of into a
    workspace buffer of the whole matrix first, so the workspace holds no dequantized weight.
  }];
  let dependentDialects = ["::megac::tx::TxDialect"];
}

def DeriveSteps : Pass<"megac-derive-steps", "mlir::ModuleOp"> {
  let summary = "Generation's logits step, derived from the training chunk's forward";
  let description = [{
    After the passes that shape the chunk functions, for a plan of one rank (pp = tp = dp = 1)
    with fp32 logits: `@logits_step` (role `logits_step`) is `@chunk0_forward`, the one chunk's
    forward, returning the cross-entropy's logits instead of the loss and its stash, the values
    nothing then reads removed (generation reads the whole vocabulary on one rank). Evaluation
    runs the chunks' forwards themselves: there is no evaluation step.
  }];
  let dependentDialects = ["::megac::MegacDialect"];
}

def DeriveDecodeStep : Pass<"megac-derive-decode-step", "mlir::ModuleOp"> {
  let summary = "Generation's decode_step, from the frontend's module built for one position";
  let description = [{
    On the frontend's module of the same spec built for seq_length 1 (megac compile builds it
    for a program with a logits step on the CPU): `@forward` becomes `@decode_step`, returning
    the logits its cross-entropy reads (role `decode_step`), and every other function is
    renamed `decode_<name>`, so the program can hold them beside the training step's. Its
    attention reads and extends a KV cache when printed.
  }];
  let dependentDialects = ["::megac::MegacDialect"];
}

def PlanWorkspace : Pass<"megac-plan-workspace", "mlir::ModuleOp"> {
  let summary = "Each function's buffers placed in its workspace: offsets as attributes";
  let description = [{
    Last. Every value a function computes lives in the function's workspace unless it is a view
    of another buffer (`tx.reshape`, `tx.param`, a bucket's parameter or gradient) or returned
    to the caller, which passes the buffer (the returned loss, a scalar, is the exception: the
    step returns it as a number). A value is alive from the op that writes it to the last op that
    reads it or a view of it; an overlapped collective (`megac.async`) reads its input until it
    is waited for, where its result is first read. Buffers alive at the same time get disjoint
    64-byte-aligned offsets (greedy by size, or a linear scan in very large functions).

    Writes, per op, `megac.workspace_offsets` (one per result, -1 for none) and
    `megac.live_until` (the position of the last op that reads each result), and per function
    `megac.frame_bytes` (its own buffers) and `megac.workspace_bytes` (with the deepest callee's
    workspace, which starts after the frame). The gradient-bucket and parameter-gather functions
    hold no buffers and are left alone.
  }];
  let dependentDialects = ["::megac::MegacDialect"];
}

def ShardPropagate : Pass<"megac-shard-propagate", "mlir::ModuleOp"> {
  let summary = "Every value's sharding over every grid axis, from the placement, the plan and the ops' factor rules";
  let description = [{
    The first of the three passes that replace megac-tensor-parallel's one walk
    (docs/architecture.md): decides, records, changes nothing else. Seeds: parameters'
    tensor-parallel placement (`role` / `parallel_dim`), token ids and labels split on the
    batch over dp, with sequence parallelism the residual stream split on the sequence over tp;
    each op's factor rule (`getFactorRule`) carries them through it, forward and backward, until
    nothing new is decided, and through calls both ways. Where two decisions want one axis on
    two factors of an op, the stronger keeps it (placement over constraints): a
    column-parallel weight's output features over the sequence of sequence parallelism. ZeRO-3
    (optim_grads_params) keeps each parameter split on its first dimension over dp as well;
    that split is recorded on the parameter, never proposed to an op (it is gathered before
    use). Writes `megac.sharding` on every op (one per result) and function argument and
    result, with `partial` where an op sums over a split factor. Expects the IR's shapes global
    on every axis (the frontend builds the batch of every data-parallel rank).
  }];
  let dependentDialects = ["::megac::tx::TxDialect", "::mlir::func::FuncDialect"];
}

def ShardLocalize : Pass<"megac-shard-localize", "mlir::ModuleOp"> {
  let summary = "The types made per rank along dp: each dimension split over dp divided by dp";
  let description = [{
    After megac-shard-propagate: every value's dimension split over dp (the batch) divided by
    dp, function signatures with them, and the propagated `megac.sharding` removed, since
    megac-tensor-parallel still derives tensor parallelism itself (docs/architecture.md: the
    partition pass will read the propagated shardings instead). Data parallelism needs no
    collective inside a step; its gradient sums are megac-data-parallel's.
  }];
  let dependentDialects = ["::megac::tx::TxDialect", "::mlir::func::FuncDialect"];
}

def ShardPartition : Pass<"megac-shard-partition", "mlir::ModuleOp"> {
  let summary = "The collectives that give every op its operands as its factors need them, then per-rank types";
  let description = [{
    After megac-shard-propagate, on the axes given (tp): per op, its factors take the axes its
    results are split or partial over; each operand needs its dimensions split as their factors
    are, partial sums only where the op is linear in it (a sum of partial sums); where a value
    differs from what its user needs, a reshard by (source, target): partial -> whole
    all-reduce, partial -> split reduce-scatter, split -> whole all-gather, whole -> split
    all-slice, split -> split on another dimension gather then slice; one per value and needed
    sharding in a function, named after the value (`%x_gathered`) with the rule that needs it
    (`megac.rule`). Then every value's type is divided along those axes. Not yet in megac
    compile's pipeline: megac-tensor-parallel still partitions tp there (docs/architecture.md).
  }];
  let options = [
    ListOption<"partitionAxes", "axes", "std::string", "grid axes to partition (tp)">
  ];
  let dependentDialects = ["::megac::tx::TxDialect", "::mlir::func::FuncDialect", "::mlir::shard::ShardDialect"];
}

def TestFactorRules : Pass<"megac-test-factor-rules", "mlir::ModuleOp"> {
  let summary = "For tests: a remark on every op with a sharding rule, printing its rule in factors";
  let description = [{
    Each op's `getFactorRule()` (dialects/tx/TxFactorRule.h) as Shardy prints its rules:
    `([i, j, k], [k, l]) -> ([i, j, l]) {i=2, j=16, k=64, l=256} reduction={k}`. The IR is not
    changed. test/Transforms/factor-rules.mlir checks one op per line.
  }];
  let dependentDialects = ["::megac::tx::TxDialect"];
}

def TestKernelCalls : Pass<"megac-test-kernel-calls", "mlir::ModuleOp"> {
  let summary = "For tests: a remark on every op that lowers to a runtime kernel, printing its call";
  let description = [{
    Each op's `getKernelCall()` (KernelCallOpInterface, dialects/tx/TxKernelCall.h) as the
    kernel's name and its arguments in order, target-neutral:
    `layer_norm_forward(%0, %arg0, %1, %2, rows=32, dim=16, eps=1e-05)`; per-rank integers as
    `tp.rank*N`, `tp.size*N`, `decode.position`. The IR is not changed.
    test/Transforms/kernel-calls.mlir checks one op per line.
  }];
  let options = [
    Option<"decode", "decode", "bool", /*default=*/"false",
           "lower as for generation's decode step (one position, the KV cache)">,
  ];
  let dependentDialects = ["::megac::tx::TxDialect"];
}

#endif // MEGAC_TRANSFORMS_PASSES_TD
