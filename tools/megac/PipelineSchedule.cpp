#include "PipelineSchedule.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

using namespace llvm;

namespace megac {

namespace {

std::string list(const std::vector<int64_t> &values) {
  return "[" + join(map_range(values, [](int64_t v) { return std::to_string(v); }), ", ") + "]";
}

} // namespace

bool reportPipelineSchedule(const ParallelPlan &plan, const pipeline::Schedule &schedule, IRDumps &dumps,
                            ScheduleCosts costs) {
  pipeline::Simulation sim = pipeline::simulate(schedule, costs.forward, costs.backward);
  std::vector<int64_t> peaks = pipeline::peakStash(schedule), bounds;
  for (int r = 0; r < schedule.stages; ++r)
    bounds.push_back(pipeline::stashBound(schedule, r));
  bool ok = dumps.write("pipeline-schedule.txt", [&](raw_ostream &os) {
    os << "# " << pipeline::scheduleKindName(schedule.kind) << ": pp " << plan.pp << " x vpp " << plan.vpp << " chunks, "
       << plan.numMicrobatches << " microbatches; F<chunk>.<microbatch>, B likewise\n"
       << pipeline::formatScheduleText(schedule) << "\n# with messages (sA/rA: activation, sG/rG: gradient)\n"
       << pipeline::formatScheduleTextWithComms(schedule);
  });
  ok = ok && dumps.write("pipeline-trace.json", [&](raw_ostream &os) { os << pipeline::chromeTraceJson(schedule, sim); });
  if (!ok)
    return false;
  outs() << "megac: pipeline schedule " << pipeline::scheduleKindName(schedule.kind) << " over pp " << plan.pp << " x vpp " << plan.vpp
         << " chunks, " << plan.numMicrobatches << " microbatches: predicted bubble "
         << format("%.1f", 100 * sim.bubbleFraction) << "% of compute (chunk backward = "
         << format("%g", costs.backward / costs.forward) << " x forward); stashed activations per rank "
         << list(peaks) << " (bound " << list(bounds) << ")\n";
  return true;
}

} // namespace megac
