// Runs a schedule's lists in order, the way ranks execute them: sends are buffered, a receive
// blocks until the matching send (the k-th receive at dst from src of a payload takes the k-th
// such send from src to dst) has happened. Shared by the simulator and the deadlock check.
#pragma once

#include "megac/Pipeline/Schedule.h"

namespace megac::pipeline::detail {

struct Run {
  std::vector<SimEvent> events;   // rank by rank, in list order, for the steps that ran
  std::vector<size_t> stoppedAt;  // per rank: the first step that did not run (size if all did)
  std::vector<double> finish;     // per rank: when its last step that ran ended
  bool completed = true;          // false: some rank is stuck at a receive
};

Run runSchedule(const Schedule &s, double tf, double tb, double tcomm);

} // namespace megac::pipeline::detail
