// What one rank holds, per pipeline stage (every tp and dp rank of a stage holds the same amount),
// in exact bytes: the training state (parameters, gradients, optimizer state: AdamW's two
// moments, master weights) under the plan's data-parallel sharding strategy, and what the program
// allocates besides (workspace, pipeline stashes as activations, sent and received buffers as
// communication, token ids and labels as data). The runtime reports the same categories; they
// must agree. Printed by `megac compile`, written to OUT/rank-memory.json and the dumps.
#pragma once

#include "megac/Analysis/LayerActivations.h"
#include "megac/Analysis/StageBuffers.h"
#include "megac/Plan/ParallelPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace megac {

struct StageStateMemory {
  int64_t stage = 0;
  int64_t parameters = 0;      // elements of this rank's parameter blocks (no padding)
  // Elements of padding: the sharded flat buffer's (Megatron's parameter and bucket alignment),
  // or with no_shard the gradients' 64-byte alignment.
  int64_t paddingElements = 0;
  int64_t paramBytes = 0, gradBytes = 0, optimizerBytes = 0, masterBytes = 0;
  // Parameters read but never trained (LoRA's base model): their elements and bytes.
  int64_t frozenParameters = 0, frozenBytes = 0;
  // Of them, QLoRA's NF4 weights (their bytes are part of frozenBytes).
  int64_t nf4Parameters = 0, nf4Bytes = 0;
  // ZeRO-Offload, host memory: the offloaded elements' master weights, moments and gradients' copy.
  int64_t offloadedBytes = 0;
  // Besides the training state (addProgramBuffers). Data for `microbatches` per iteration: with
  // pp the compiled count, else one (OUT/train's --global-batch-size sets it: data scales with
  // the microbatches per dp rank).
  int64_t workspaceBytes = 0, activationBytes = 0, communicationBytes = 0, dataBytes = 0;
  int64_t dataBytesPerMicrobatch = 0, microbatches = 1;

  int64_t stateBytes() const {
    return paramBytes + gradBytes + optimizerBytes + masterBytes + offloadedBytes + frozenBytes;
  }
  int64_t totalBytes() const {
    return stateBytes() + workspaceBytes + activationBytes + communicationBytes + dataBytes;
  }
  /// Bytes of training state per trainable parameter (the frozen ones' bytes left out).
  double bytesPerParameter() const {
    return parameters ? double(stateBytes() - frozenBytes) / double(parameters) : 0.0;
  }
};

/// One entry per pipeline stage, from the parameter tables of the compiled module.
llvm::SmallVector<StageStateMemory> stateMemory(mlir::ModuleOp module, const ParallelPlan &plan);

/// Adds what the emitted program allocates besides the training state (one entry per stage).
void addProgramBuffers(llvm::MutableArrayRef<StageStateMemory> stages, llvm::ArrayRef<StageBuffers> buffers);

/// "parameters 1.50 MiB, gradients ..." lines, one per stage, each starting with `prefix`.
void printStateMemory(llvm::ArrayRef<StageStateMemory> stages, const ParallelPlan &plan, llvm::StringRef prefix,
                      llvm::raw_ostream &os);
/// The same as one JSON object (exact bytes), with what each layer kind keeps for its backward.
std::string stateMemoryJson(llvm::ArrayRef<StageStateMemory> stages, const ParallelPlan &plan,
                            llvm::ArrayRef<LayerActivations> layers);

} // namespace megac
