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

} // namespace megac::emit
