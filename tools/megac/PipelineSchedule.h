// megac compile with pipeline parallelism: shows the module's schedule (text, simulated Chrome
// trace, predicted bubble).
#pragma once

#include "IRDumps.h"
#include "megac/Plan/ParallelPlan.h"
#include "pipe/schedule/Schedule.h"

namespace megac {

struct ScheduleCosts {
  double forward = 1, backward = 2; // of one chunk, for the simulation
};

/// Prints the predicted bubble and stash peaks; dumps the schedule as text and as a Chrome trace
/// of its simulation. False when a dump could not be written.
bool reportPipelineSchedule(const ParallelPlan &plan, const pipeline::Schedule &schedule, IRDumps &dumps,
                            ScheduleCosts costs);

} // namespace megac
