// megac compile with pipeline parallelism: builds and verifies the schedule for the plan, shows
// it (text, simulated Chrome trace, predicted bubble) and records it in the module.
#pragma once

#include "megac/Frontend/ParallelPlan.h"
#include "megac/Pipeline/Schedule.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace megac {

/// Writes a --dump-ir file (a no-op without --dump-ir); false when writing failed.
using DumpFn = llvm::function_ref<bool(llvm::StringRef name, llvm::function_ref<void(llvm::raw_ostream &)>)>;

struct ScheduleCosts {
  double forward = 1, backward = 2; // of one chunk, for the simulation
};

/// The plan's schedule, verified (an error names the flag and the fix).
llvm::Expected<pipeline::Schedule> buildPipelineSchedule(const ParallelPlan &plan, ScheduleCosts costs);

/// Prints the predicted bubble and stash peaks; dumps the schedule as text and as a Chrome trace
/// of its simulation. False when a dump could not be written.
bool reportPipelineSchedule(const ParallelPlan &plan, const pipeline::Schedule &schedule, DumpFn dump,
                            ScheduleCosts costs);

} // namespace megac
