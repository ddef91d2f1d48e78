// The program's parameter table: the order in which generated code and the runtime number the
// parameters. Passes that refer to parameters by index (data-parallel buckets) and the emitter
// use this one definition.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "tx/TxOps.h"

namespace megac::tx {

/// The distinct parameter blocks (checkpoint name + block offsets) of `entry`, in order of
/// first appearance.
llvm::SmallVector<ParamOp> parameterTable(mlir::func::FuncOp entry);

} // namespace megac::tx
