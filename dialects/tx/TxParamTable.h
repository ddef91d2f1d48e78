// The program's parameter table: the order in which generated code and the runtime number the
// parameters. Passes that refer to parameters by index (data-parallel buckets) and the emitter
// use this one definition.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "tx/TxOps.h"

#include <string>

namespace megac::tx {

/// The distinct parameter blocks (checkpoint name + block offsets) of `fns`, in order of first
/// appearance.
llvm::SmallVector<ParamOp> parameterTable(llvm::ArrayRef<mlir::func::FuncOp> fns);
inline llvm::SmallVector<ParamOp> parameterTable(mlir::func::FuncOp entry) {
  return parameterTable(llvm::ArrayRef<mlir::func::FuncOp>(entry));
}

/// With pipeline parallelism (megac-pipeline-split ran): the chunk functions pipeline rank
/// `stage` runs, in chunk order, each chunk's forward before its backward. A stage's parameter
/// table is parameterTable(stageFunctions(...)).
llvm::SmallVector<mlir::func::FuncOp> stageFunctions(mlir::ModuleOp module, int64_t stage);

/// The number of pipeline stages megac-pipeline-split made (1 when it did not run).
int64_t pipelineStages(mlir::ModuleOp module);

/// Whether a chunk function (megac-pipeline-split's chunk<c>_forward / chunk<c>_backward) is a
/// backward.
inline bool isChunkBackward(mlir::func::FuncOp fn) { return fn.getName().ends_with("_backward"); }

/// The data-parallel gradient buckets of pipeline stage `stage` (megac-data-parallel).
inline std::string stageSyncName(int64_t stage) { return "sync_gradients_stage" + std::to_string(stage); }

} // namespace megac::tx
