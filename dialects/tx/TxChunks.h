// The pipeline chunk functions megac-pipeline-split makes: each carries its chunk (and the
// number of values its forward stashes); chunk c runs on pipeline rank c % pp.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace megac::tx {

/// The chunk of a chunk function, none for any other function.
std::optional<int64_t> chunkOf(mlir::func::FuncOp fn);

/// Whether the module's training step is split into chunk functions.
bool hasChunkFunctions(mlir::ModuleOp module);

/// The chunk functions pipeline rank `stage` (of `stages`) runs, in chunk order, each chunk's
/// forward before its backward.
llvm::SmallVector<mlir::func::FuncOp> stageFunctions(mlir::ModuleOp module, int64_t stage, int64_t stages);

} // namespace megac::tx
