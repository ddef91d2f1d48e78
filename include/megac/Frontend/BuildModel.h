// Builds the `tx` IR of a model spec: the forward pass of one microbatch with its loss.
#pragma once

#include "megac/Frontend/ModelSpec.h"
#include "megac/Plan/ParallelPlan.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace megac {

/// A module with `@transformer_layer(x, params...)` (one function for the layer kind all
/// layers share) and `@forward(ids, labels) -> loss`, which declares every parameter with
/// its Hugging Face checkpoint name and calls the layer function once per layer. The module's
/// model attribute records the sizes later stages need, its @grid the (validated) plan.
/// plan.paddedVocab sizes the embedding and LM head (Megatron's vocabulary padding); the padding
/// rows are `padded` parameter blocks and stay out of the softmax.
mlir::OwningOpRef<mlir::ModuleOp> buildModel(mlir::MLIRContext &context, const ModelSpec &spec,
                                             const ParallelPlan &plan, int64_t microBatchSize);

} // namespace megac
