// Emits the C++ of a training program from the IR after autodiff: one C++ function per MLIR
// function (so one per layer kind), calls into the runtime's kernels, buffers in a statically
// planned arena, and the tables (parameters, sizes) the runtime's train_main reads.
#pragma once

#include "megac/Analysis/StageBuffers.h"
#include "megac/Plan/ParallelPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
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
  // The precision OUT/train runs in (its --bf16 / --fp16 must agree): the plan's activation
  // precision, or on CUDA the GEMMs' alone (activations stay fp32 there).
  ActivationPrecision precision = ActivationPrecision::Fp32;
  // The frontend's module of the same spec built for seq_length 1 (null: none): emitted as
  // decode_step, generation's one position with a KV cache, where the program has a
  // logits_step on the CPU.
  mlir::ModuleOp decodeModule;
  // A LoRA program's adapter_config.json (PEFT's), written beside each checkpoint's adapters;
  // empty: not a LoRA program.
  std::string adapterConfigJson;
  // `megac compile ...` as it was run, without the data-parallel size (the runtime adds the --dp
  // that fits the ranks it was started on when they are not the plan's); empty: none.
  std::string recompileCommand;
};

/// Writes main.cpp (main.cu for CUDA) to `os` and a human-readable memory plan to `plan`. What
/// the program allocates besides the training state is megac/Analysis/StageBuffers.h's.
mlir::LogicalResult emitTrainingProgram(mlir::ModuleOp module, const EmitOptions &options,
                                        llvm::raw_ostream &os, llvm::raw_ostream &plan);

} // namespace megac
