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

Expected<pipeline::Schedule> buildPipelineSchedule(const ParallelPlan &plan, ScheduleCosts costs) {
  std::optional<pipeline::ScheduleKind> kind = pipeline::parseScheduleKind(plan.pipelineSchedule);
  if (!kind)
    return createStringError(inconvertibleErrorCode(), "--pipeline-schedule " + plan.pipelineSchedule +
                                                           " is not a schedule; use gpipe, 1f1b or interleaved");
  if (!(costs.forward > 0) || !(costs.backward > 0))
    return createStringError(inconvertibleErrorCode(),
                             "--pipeline-forward-cost and --pipeline-backward-cost must be > 0, got " +
                                 std::to_string(costs.forward) + " and " + std::to_string(costs.backward));
  Expected<pipeline::Schedule> schedule = pipeline::buildSchedule(*kind, static_cast<int>(plan.pp),
                                                                  static_cast<int>(plan.vpp),
                                                                  static_cast<int>(plan.numMicrobatches));
  // Proven before anything runs (matched messages, no deadlock, bounded stash) by the
  // pipe.schedule op's verifier once the schedule joins the IR.
  return schedule;
}

bool reportPipelineSchedule(const ParallelPlan &plan, const pipeline::Schedule &schedule, DumpFn dump,
                            ScheduleCosts costs) {  pipeline::Simulation sim = pipeline::simulate(schedule, costs.forward, costs.backward);
  std::vector<int64_t> peaks = pipeline::peakStash(schedule), bounds;
  for (int r = 0; r < schedule.stages; ++r)
    bounds.push_back(pipeline::stashBound(schedule, r));
  bool ok = dump("pipeline-schedule.txt", [&](raw_ostream &os) {
    os << "# " << plan.pipelineSchedule << ": pp " << plan.pp << " x vpp " << plan.vpp << " chunks, "
       << plan.numMicrobatches << " microbatches; F<chunk>.<microbatch>, B likewise\n"
       << pipeline::formatScheduleText(schedule) << "\n# with messages (sA/rA: activation, sG/rG: gradient)\n"
       << pipeline::formatScheduleTextWithComms(schedule);
  });
  ok = ok && dump("pipeline-trace.json", [&](raw_ostream &os) { os << pipeline::chromeTraceJson(schedule, sim); });
  if (!ok)
    return false;
  outs() << "megac: pipeline schedule " << plan.pipelineSchedule << " over pp " << plan.pp << " x vpp " << plan.vpp
         << " chunks, " << plan.numMicrobatches << " microbatches: predicted bubble "
         << format("%.1f", 100 * sim.bubbleFraction) << "% of compute (chunk backward = "
         << format("%g", costs.backward / costs.forward) << " x forward); stashed activations per rank "
         << list(peaks) << " (bound " << list(bounds) << ")\n";
  return true;
}

} // namespace megac
