// The parallel plan as IR: one `shard.grid @grid` whose shape is the plan's sizes in Megatron's
// rank order (pp, dp, tp: tp fastest), with the axis names and the rest of the plan (sequence
// parallelism, pipeline schedule, gradient buckets) as its attributes. The frontend records it
// once; every pass and emitter reads it from there.
#pragma once

#include "megac/Plan/ParallelPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace megac {

/// The grid's axes in Megatron's rank order, slowest first (the index in `grid_axes`).
enum class GridAxis : int16_t { Pp = 0, Dp = 1, Tp = 2 };
/// "pp", "dp", "tp".
llvm::StringRef gridAxisName(GridAxis axis);

/// Adds @grid, recording `plan`, at the start of `module`.
void recordPlan(mlir::ModuleOp module, const ParallelPlan &plan);

/// The plan recorded in `module`. Fails with an error at the module naming `pass` when there
/// is no @grid or it does not hold a plan.
mlir::FailureOr<ParallelPlan> readPlan(mlir::ModuleOp module, llvm::StringRef pass);

} // namespace megac
