// megac's passes, in the order `megac compile` runs them.
#ifndef MEGAC_TRANSFORMS_PASSES_TD
#define MEGAC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"megac-autodiff", "mlir::ModuleOp"> {
  let summary = "Builds the backward pass: forward + backward of one microbatch";
  let description = [{
    Differentiates the entry function `@forward(ids, labels) -> loss` with respect to every
    `tx.param`, walking its ops last to first and asking each op for its vector-Jacobian
    product (`VjpOpInterface`). The entry becomes `@train_step(ids, labels, dloss) -> loss`:
    `dloss` seeds the backward pass (the runtime passes 1 / number of microbatches) and each
    parameter's gradient flows into a `tx.param_grad`.

    A function called from the entry (one per distinct layer kind) is split into `@F_fwd`,
    which also returns the activations its backward needs, and `@F_bwd`, which takes them
    with the cotangents of F's results and returns the cotangents of F's arguments. So the
    program keeps one function per layer kind, and a later pass can place the halves on
    different pipeline stages.
  }];
  let options = [
    Option<"entry", "entry", "std::string", "\"forward\"", "name of the function to differentiate">,
  ];
  let dependentDialects = ["::megac::tx::TxDialect", "::mlir::func::FuncDialect"];
}

#endif // MEGAC_TRANSFORMS_PASSES_TD
