// Conversion between megac::pipeline::Schedule (the data the builder, verifier and simulator
// work on) and the `pipe.schedule` op.
#pragma once

#include "pipe/schedule/Schedule.h"
#include "pipe/PipeOps.h"
#include "tx/TxNames.h"

#include "mlir/IR/Builders.h"

namespace megac::pipe {

/// Builds `pipe.schedule @name` at the builder's insertion point: one `pipe.rank` per rank
/// holding its actions, then its closing ones (Schedule::closing).
ScheduleOp buildScheduleOp(mlir::OpBuilder &builder, mlir::Location loc,
                           const pipeline::Schedule &schedule, llvm::StringRef name = names::kSchedule);

/// Reads a `pipe.schedule` back (no verification of the schedule itself: verifySchedule does
/// that). Fails if the kind is unknown, a rank is missing or repeated, or a value does not fit.
llvm::Expected<pipeline::Schedule> scheduleFromOp(ScheduleOp op);

/// The op of step `step` (its index in the rank's list) of rank `rank`; the rank op for step
/// -1; null if there is none.
mlir::Operation *findScheduleStep(ScheduleOp op, int rank, int step);

} // namespace megac::pipe
