// The `megac` dialect: the parallel plan as a typed attribute, and the attributes megac's passes
// hand each other (`megac.*`), verified where they are attached.
#ifndef MEGAC_PLAN_DIALECT_TD
#define MEGAC_PLAN_DIALECT_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

def Megac_Dialect : Dialect {
  let name = "megac";
  let cppNamespace = "::megac";
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let summary = "megac's parallel plan and the attributes its passes hand each other";
}

def Megac_PlanAttr : AttrDef<Megac_Dialect, "Plan"> {
  let mnemonic = "plan";
  let summary = "the parallel plan every pass and emitter reads";
  let description = [{
    The plan megac compile was given, under Megatron's flag names, on `shard.grid @grid`: the
    grid's sizes (pp, dp, tp: the grid's shape, which must match), sequence parallelism, the
    vocabulary divisor and the gradient buckets, then the keys of each group that is on (the
    pipeline schedule when pp > 1, sharding, recomputation, 16-bit activations, LoRA):

    ```mlir
    shard.grid @grid(shape = 2x1x2) {megac.axes = ["pp", "dp", "tp"],
      megac.plan = #megac.plan<pp = 2, dp = 1, tp = 2, sequence_parallel = true,
                               num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b",
                               num_microbatches = 4, ...>}
    ```

    Parsing checks every key, type and limit (the checks `megac compile` runs on its flags);
    passes read the plan through `readPlan` and never parse it again.
  }];
  let parameters = (ins AttrParameter<"::megac::ParallelPlan", "the plan",
                                      "const ::megac::ParallelPlan &">:$plan);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Megac_FunctionRole : I32EnumAttr<"FunctionRole", "what a function is in the training program", [
    I32EnumAttrCase<"Model", 0, "model">,
    I32EnumAttrCase<"Layer", 1, "layer">,
    I32EnumAttrCase<"LayerForward", 2, "layer_forward">,
    I32EnumAttrCase<"LayerForwardOnly", 3, "layer_forward_only">,
    I32EnumAttrCase<"LayerBackward", 4, "layer_backward">,
    I32EnumAttrCase<"TrainStep", 5, "train_step">,
    I32EnumAttrCase<"ChunkForward", 6, "chunk_forward">,
    I32EnumAttrCase<"ChunkBackward", 7, "chunk_backward">,
    I32EnumAttrCase<"SyncGradients", 8, "sync_gradients">,
    I32EnumAttrCase<"GatherParams", 9, "gather_params">,
    I32EnumAttrCase<"LogitsStep", 11, "logits_step">,
    I32EnumAttrCase<"DecodeStep", 12, "decode_step">]> {
  let cppNamespace = "::megac";
  let genSpecializedAttr = 0;
}

def Megac_FunctionRoleAttr : EnumAttr<Megac_Dialect, Megac_FunctionRole, "role"> {
  let summary = "what a function is in the training program";
  let description = [{
    `megac.role` on every function the passes read by what it is, set by the pass that makes it:

    | role | made by | what it is |
    |---|---|---|
    | `model` | the frontend | `@forward`: one microbatch, ids and labels to the loss |
    | `layer` | the frontend | one transformer layer (one function per layer kind) |
    | `layer_forward` | megac-autodiff | a layer's forward half, returning what its backward reads |
    | `layer_forward_only` | megac-recompute | a layer's forward keeping nothing (full recomputation) |
    | `layer_backward` | megac-autodiff | a layer's backward half |
    | `train_step` | megac-autodiff | forward and backward of one microbatch |
    | `chunk_forward`, `chunk_backward` | megac-pipeline-split | a pipeline chunk's halves (with `megac.chunk`) |
    | `sync_gradients`, `gather_params` | megac-data-parallel | a stage's gradient buckets and parameter gathers |
    | `logits_step` | megac-derive-steps | the one chunk's forward up to the logits (one rank, fp32: generation) |
    | `decode_step` | megac-derive-decode-step | one position's logits with a KV cache (generation) |

    Names follow the same scheme for readers (`F_forward` / `F_backward`, `chunk<c>_...`), but no
    pass decides anything from a name.
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // MEGAC_PLAN_DIALECT_TD
