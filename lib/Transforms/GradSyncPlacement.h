// Where --overlap-grad-reduce starts each data-parallel gradient bucket: right after the last
// tx.param_grad of its parameters, in @train_step or in the pipeline chunk backward that makes
// them (megac-data-parallel).
#pragma once

#include "tx/TxParamTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"


namespace megac {

/// Parameters first..last of a parameter table, summed by one all-reduce (or, with
/// `shardNumel`, the distributed optimizer's flat bucket reduce-scattered into shards of that many
/// elements).
struct GradBucket {
  int64_t first, last, elements;
  int64_t shardNumel = 0;
};

/// Moves each tx.param_grad of `fn` up to right after the op that makes its gradient.
void hoistParamGrads(mlir::func::FuncOp fn);

/// Moves each tx.param_grad of `fn` up to where its gradient is made, then puts a
/// tx.start_grad_sync after the last tx.param_grad of each bucket whose gradients `fn` makes
/// (@train_step: of every bucket).
void placeGradSyncStarts(mlir::func::FuncOp fn, const tx::ParamTable &table,
                         llvm::ArrayRef<GradBucket> buckets);

/// Each bucket of a pipeline stage is started exactly once, by the chunk backward that makes all
/// of its gradients: otherwise it would never be summed, or be summed before it is final.
mlir::LogicalResult checkGradSyncStarts(mlir::ModuleOp module, int64_t stage, llvm::ArrayRef<mlir::func::FuncOp> fns,
                                        const tx::ParamTable &table, llvm::ArrayRef<GradBucket> buckets);

} // namespace megac
