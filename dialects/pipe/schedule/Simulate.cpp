// Timing of a schedule: the bubble it leaves and a trace to look at.
#include "ScheduleRun.h"

#include <algorithm>
#include <limits>

namespace megac::pipeline {

Simulation simulate(const Schedule &s, double tf, double tb, double tcomm) {
  detail::Run run = detail::runSchedule(s, tf, tb, tcomm);
  Simulation sim;
  sim.makespan = run.completed ? 0.0 : std::numeric_limits<double>::infinity();
  if (run.completed)
    for (double finish : run.finish)
      sim.makespan = std::max(sim.makespan, finish);
  // Every rank computes V m forwards and backwards; the rest of the makespan is bubble.
  sim.busyPerRank = double(s.virtualStages) * s.microbatches * (tf + tb);
  sim.bubbleFraction = (sim.makespan - sim.busyPerRank) / sim.busyPerRank;
  sim.events = std::move(run.events);
  return sim;
}

} // namespace megac::pipeline
