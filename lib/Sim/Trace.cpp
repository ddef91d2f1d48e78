// megac simulate --trace: the simulated iteration as a Chrome / Perfetto trace (chrome://tracing,
// ui.perfetto.dev), one process per rank class (a pp stage: its tp and dp ranks do the same work),
// times in microseconds. The gaps between a stage's spans are its pipeline bubble.
#include "megac/Sim/Simulate.h"

#include "llvm/Support/FormatVariadic.h"

#include <set>

using namespace megac::sim;

std::string megac::sim::traceJson(const Simulation &s, const Cluster &cluster) {
  llvm::json::Array events;
  std::set<int64_t> stages;
  for (const TraceSpan &span : s.trace)
    stages.insert(span.stage);
  for (int64_t stage : stages)
    events.push_back(llvm::json::Object{
        {"name", "process_name"},
        {"ph", "M"},
        {"pid", stage},
        {"args", llvm::json::Object{{"name", "pp stage " + std::to_string(stage) + " (" + cluster.device + ")"}}}});
  for (const TraceSpan &span : s.trace) {
    llvm::json::Object args;
    if (span.chunk >= 0)
      args["chunk"] = span.chunk;
    if (span.microbatch >= 0)
      args["microbatch"] = span.microbatch;
    events.push_back(llvm::json::Object{{"name", span.name},
                                        {"cat", span.category},
                                        {"ph", "X"},
                                        {"pid", span.stage},
                                        {"tid", 0},
                                        {"ts", span.start * 1e6},
                                        {"dur", (span.end - span.start) * 1e6},
                                        {"args", std::move(args)}});
  }
  llvm::json::Object trace{{"traceEvents", std::move(events)},
                           {"displayTimeUnit", "ms"},
                           {"otherData", llvm::json::Object{{"cluster", cluster.name},
                                                            {"iteration_time_s", s.iterationSeconds},
                                                            {"slowest_stage", s.slowestStage}}}};
  return llvm::formatv("{0}", llvm::json::Value(std::move(trace))).str();
}
