// What a compiled program allocates per rank besides the training state, per pipeline stage
// (pp = 1: one), read from the compiled module: the workspace megac-plan-workspace sized, the
// pipeline executor's stashes and sent / received buffers (megart/pipeline_buffers.h), and the
// device copies of a microbatch's token ids and labels. The memory plan (RankMemory.h) adds it
// to the state's bytes; the emitter prints the same tables.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/TypeRange.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace megac {

struct StageBuffers {
  int64_t workspaceBytes = 0, activationBytes = 0, communicationBytes = 0;
  int64_t dataBytesPerMicrobatch = 0;
  int64_t microbatches = 0; // per iteration and dp rank where the program fixes it (pp), else 0
};

/// Where each stashed value lives in a chunk's stash (64-byte aligned, like every buffer).
struct StashLayout {
  llvm::SmallVector<int64_t> offsets;
  int64_t bytes = 0;
};
StashLayout stashLayout(mlir::TypeRange types);

/// The bytes a pipeline chunk's forward passes on, or receives: the residual stream, in fp32 or
/// 16 bits (0 at the ends).
struct ChunkBoundary {
  int64_t inputBytes = 0, outputBytes = 0, elementBytes = 4;
};
ChunkBoundary chunkBoundary(mlir::func::FuncOp forward, bool first, bool last);

/// Every stage's buffers, from the module after megac-plan-workspace (its functions' workspace
/// sizes) and megac-pipeline-schedule (the executor's buffer pool follows the schedule).
mlir::FailureOr<llvm::SmallVector<StageBuffers>> stageBuffers(mlir::ModuleOp module);

} // namespace megac
