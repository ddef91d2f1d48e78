// What one rank holds of the training state, per pipeline stage (every tp and dp rank of a stage
// holds the same amount): parameters, gradients, optimizer state (AdamW's two moments) and master
// weights, under the plan's data-parallel sharding strategy, in exact bytes. Printed by
// `megac compile`, written to OUT/rank-memory.json and the dumps.
#pragma once

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

  int64_t totalBytes() const { return paramBytes + gradBytes + optimizerBytes + masterBytes; }
  double bytesPerParameter() const { return parameters ? double(totalBytes()) / double(parameters) : 0.0; }
};

/// One entry per pipeline stage, from the parameter tables of the compiled module.
llvm::SmallVector<StageStateMemory> stateMemory(mlir::ModuleOp module, const ParallelPlan &plan);

/// "parameters 1.50 MiB, gradients ..." lines, one per stage, each starting with `prefix`.
void printStateMemory(llvm::ArrayRef<StageStateMemory> stages, const ParallelPlan &plan, llvm::StringRef prefix,
                      llvm::raw_ostream &os);
/// The same as one JSON object (exact bytes).
std::string stateMemoryJson(llvm::ArrayRef<StageStateMemory> stages, const ParallelPlan &plan);

} // namespace megac
