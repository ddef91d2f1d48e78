// Timing of a schedule: the bubble it leaves and a trace to look at.
#include "ScheduleRun.h"

#include <algorithm>
#include <limits>

namespace megac::pipeline {

Simulation simulate(const Schedule &s, const ActionCosts &costs) {
  detail::Run run = detail::runSchedule(s, costs);
  Simulation sim;
  sim.makespan = run.completed ? 0.0 : std::numeric_limits<double>::infinity();
  if (run.completed)
    for (double finish : run.finish)
      sim.makespan = std::max(sim.makespan, finish);
  // The rest of the makespan beyond the busiest rank's compute is bubble.
  std::vector<double> busy(s.ranks.size(), 0.0);
  for (const SimEvent &e : run.events)
    if (e.kind == ActionKind::Forward || e.kind == ActionKind::Backward)
      busy[e.rank] += e.end - e.start;
  sim.busyPerRank = busy.empty() ? 0.0 : *std::max_element(busy.begin(), busy.end());
  sim.bubbleFraction = (sim.makespan - sim.busyPerRank) / sim.busyPerRank;
  sim.events = std::move(run.events);
  return sim;
}

Simulation simulate(const Schedule &s, double tf, double tb, double tcomm) {
  ActionCosts costs{[=](const Action &a) { return a.kind == ActionKind::Forward ? tf : tb; },
                    [=](const Action &) { return tcomm; }};
  return simulate(s, costs);
}

} // namespace megac::pipeline
