// Emits the C++ of a training program from the IR after autodiff: one C++ function per MLIR
// function (so one per layer kind), calls into the runtime's kernels, buffers in a statically
// planned arena, and the tables (parameters, sizes) the runtime's train_main reads.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace megac {

/// What the generated code runs on: the CPU kernels (megart::cpu) on host memory, or the CUDA
/// kernels (megart::cuda) on GPU memory. The program text is the same but for the kernels'
/// namespace, buffer copies and how scalars (the loss) come back to the host.
enum class Target { Cpu, Cuda };

struct EmitOptions {
  std::string header;  // comment lines at the top: spec, plan, rank layout
  std::string summary; // one line printed by the program at start-up
  std::string hfConfigJson; // config.json written beside each checkpoint; empty: none
  std::string specYaml;     // the spec's text, recorded in each checkpoint's train_state.json
  Target target = Target::Cpu;
};

/// Writes main.cpp (main.cu for CUDA) to `os` and a human-readable memory plan to `plan`.
mlir::LogicalResult emitTrainingProgram(mlir::ModuleOp module, const EmitOptions &options,
                                        llvm::raw_ostream &os, llvm::raw_ostream &plan);

} // namespace megac
