// Emits the C++ of a training program from the IR after autodiff: one C++ function per MLIR
// function (so one per layer kind), calls into the runtime's kernels, buffers in a statically
// planned arena, and the tables (parameters, sizes) the runtime's train_main reads.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace megac {

struct EmitOptions {
  std::string header;  // comment lines at the top: spec, plan, rank layout
  std::string summary; // one line printed by the program at start-up
};

/// Writes main.cpp to `os` and a human-readable memory plan to `plan`.
mlir::LogicalResult emitTrainingProgram(mlir::ModuleOp module, const EmitOptions &options,
                                        llvm::raw_ostream &os, llvm::raw_ostream &plan);

} // namespace megac
