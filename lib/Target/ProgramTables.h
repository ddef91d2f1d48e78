// The static tables of a generated program besides its functions: parameter descriptors and
// the data-parallel gradient buckets.
#pragma once

#include "FunctionEmitter.h"

namespace megac::emit {

/// `const megart::ParamDesc NAME[]` in table order.
void emitParamTable(llvm::StringRef name, const tx::ParamTable &params, llvm::raw_ostream &os);

/// A @sync_gradients function (buckets of `table`'s gradients, each all-reduced over dp) as a
/// C++ function of the same name.
mlir::LogicalResult emitSyncGradients(mlir::func::FuncOp fn, const tx::ParamTable &table,
                                      llvm::raw_ostream &os);

/// A @gather_params function (each bucket's parameter shard all-gathered over dp after the
/// distributed optimizer's step) as a C++ GatherParamsFn of the same name.
mlir::LogicalResult emitGatherParams(mlir::func::FuncOp fn, llvm::raw_ostream &os);

/// megac-data-parallel's flat layout (megac.flat_layout) as `const megart::FlatLayoutDesc NAME`.
void emitFlatLayout(llvm::StringRef name, mlir::DictionaryAttr layout, llvm::raw_ostream &os);

/// For a sharded @sync_gradients (one with megac.flat_layout): emits its @`gatherName` and the
/// layout table `PREFIXFlatLayout`, and returns the descriptor fields that name them
/// (", .flat_layout = ..., .gather_params = ..."); "" for an unsharded one.
mlir::FailureOr<std::string> emitShardedFields(mlir::ModuleOp module, mlir::func::FuncOp syncFn,
                                               llvm::StringRef gatherName, llvm::StringRef prefix,
                                               llvm::raw_ostream &os);

} // namespace megac::emit
