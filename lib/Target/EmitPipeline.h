// The pipeline-parallel part of a generated program: per stage (pipeline rank), its chunk
// functions, parameter table, gradient buckets and compiled schedule, as the runtime's
// PipelineStageDesc tables.
#pragma once

#include "FunctionEmitter.h"
#include "megac/Plan/ParallelPlan.h"
#include "pipe/schedule/Schedule.h"

#include "mlir/IR/BuiltinOps.h"

namespace megac::emit {

/// The ProgramDesc fields the stages and generation's steps fill, as C++ expressions.
struct ProgramFields {
  std::string logitsStep = "nullptr"; // single-rank fp32 programs only (generation)
  std::string decodeStep = "nullptr"; // the same on the CPU, with a KV cache
  int64_t kvCacheLayers = 0, kvCacheRow = 0;
  int64_t generationArenaBytes = 0; // the workspace logits_step and decode_step need
  std::string stages = "nullptr";
  int64_t numMicrobatches = 0;
  std::string schedule = "nullptr";
  int64_t virtualStages = 1;
};

/// Emits every stage's chunk functions and tables (after megac-pipeline-split and, with dp > 1,
/// megac-data-parallel), with `schedule`'s per-rank order.
mlir::FailureOr<ProgramFields> emitPipelineStages(mlir::ModuleOp module, const ParallelPlan &parallelPlan,
                                                  const pipeline::Schedule &schedule, Target target,
                                                  llvm::raw_ostream &os, llvm::raw_ostream &plan);

} // namespace megac::emit
