// The `megac` dialect: the parallel plan as a typed attribute, and the attributes megac's passes
// hand each other (`megac.*`), verified where they are attached.
#ifndef MEGAC_PLAN_DIALECT_TD
#define MEGAC_PLAN_DIALECT_TD

include "mlir/IR/AttrTypeBase.td"
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

#endif // MEGAC_PLAN_DIALECT_TD
