// Where --overlap-grad-reduce starts each data-parallel gradient bucket: right after the last
// tx.param_grad of its parameters, in @train_step or in the pipeline chunk backward that makes
// them (megac-data-parallel).
#pragma once

#include "tx/TxOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace megac {

/// Parameters first..last of a parameter table, summed by one all-reduce.
struct GradBucket {
  int64_t first, last, elements;
};

/// Where `p` is in `table`: the entry with its checkpoint name and block offsets.
std::optional<int64_t> paramIndex(llvm::ArrayRef<tx::ParamOp> table, tx::ParamOp p);

/// The first table index of the parameters `fn` uses.
std::optional<int64_t> firstParamIndex(mlir::func::FuncOp fn, llvm::ArrayRef<tx::ParamOp> table);

/// Moves each tx.param_grad of `fn` up to where its gradient is made, then puts a
/// tx.start_grad_sync after the last tx.param_grad of each bucket whose gradients `fn` makes
/// (@train_step: of every bucket).
void placeGradSyncStarts(mlir::func::FuncOp fn, llvm::ArrayRef<tx::ParamOp> table,
                         llvm::ArrayRef<GradBucket> buckets);

/// Each bucket of a pipeline stage is started exactly once, by the chunk backward that makes all
/// of its gradients: otherwise it would never be summed, or be summed before it is final.
mlir::LogicalResult checkGradSyncStarts(mlir::ModuleOp module, int64_t stage, llvm::ArrayRef<mlir::func::FuncOp> fns,
                                        llvm::ArrayRef<tx::ParamOp> table, llvm::ArrayRef<GradBucket> buckets);

} // namespace megac
