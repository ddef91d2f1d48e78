// Schedules for people: one line per rank, and a Chrome trace / Perfetto timeline.
#include "pipe/schedule/Schedule.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace megac::pipeline {
namespace {

bool isCompute(ActionKind k) { return k == ActionKind::Forward || k == ActionKind::Backward; }

// "F0.1", "B2.3"
std::string computeName(ActionKind k, int chunk, int microbatch) {
  return (k == ActionKind::Forward ? "F" : "B") + std::to_string(chunk) + "." +
         std::to_string(microbatch);
}

std::string actionToken(const Action &a) {
  std::string where = std::to_string(a.chunk) + "." + std::to_string(a.microbatch);
  switch (a.kind) {
  case ActionKind::SendActivation:
    return "sA" + where + ">" + std::to_string(a.peer);
  case ActionKind::RecvActivation:
    return "rA" + where + "<" + std::to_string(a.peer);
  case ActionKind::SendGrad:
    return "sG" + where + ">" + std::to_string(a.peer);
  case ActionKind::RecvGrad:
    return "rG" + where + "<" + std::to_string(a.peer);
  default:
    return computeName(a.kind, a.chunk, a.microbatch);
  }
}

std::string formatLines(const Schedule &s, bool withComms) {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    os << "rank " << r << ":";
    for (const Action &a : s.ranks[r])
      if (withComms || isCompute(a.kind))
        os << " " << actionToken(a);
    os << "\n";
  }
  return text;
}

} // namespace

std::string formatScheduleText(const Schedule &s) { return formatLines(s, false); }

std::string formatScheduleTextWithComms(const Schedule &s) { return formatLines(s, true); }

std::string chromeTraceJson(const Schedule &s, const Simulation &sim) {
  // Scale so that one forward lasts 1000 us whatever unit tf was given in.
  double tf = 0;
  for (const SimEvent &e : sim.events)
    if (e.kind == ActionKind::Forward) {
      tf = e.end - e.start;
      break;
    }
  double scale = tf > 0 ? 1000.0 / tf : 1000.0;

  llvm::json::Array events;
  std::string title = "pipeline schedule " + scheduleKindName(s.kind).str() +
                      " P=" + std::to_string(s.stages) + " V=" + std::to_string(s.virtualStages) +
                      " m=" + std::to_string(s.microbatches);
  events.push_back(llvm::json::Object{
      {"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", llvm::json::Object{{"name", title}}}});
  for (size_t r = 0; r < s.ranks.size(); ++r)
    events.push_back(llvm::json::Object{{"name", "thread_name"},
                                        {"ph", "M"},
                                        {"pid", 0},
                                        {"tid", int64_t(r)},
                                        {"args", llvm::json::Object{{"name", "pp rank " + std::to_string(r)}}}});
  for (const SimEvent &e : sim.events) {
    if (!isCompute(e.kind))
      continue;
    events.push_back(llvm::json::Object{
        {"name", computeName(e.kind, e.chunk, e.microbatch)},
        {"cat", e.kind == ActionKind::Forward ? "forward" : "backward"},
        {"ph", "X"},
        {"pid", 0},
        {"tid", e.rank},
        {"ts", e.start * scale},
        {"dur", (e.end - e.start) * scale},
        {"args", llvm::json::Object{{"chunk", e.chunk}, {"microbatch", e.microbatch}}}});
  }
  // A deadlocked simulation has no makespan; JSON has no infinity.
  auto number = [](double x) { return std::isfinite(x) ? llvm::json::Value(x) : llvm::json::Value(nullptr); };
  llvm::json::Object trace{{"traceEvents", std::move(events)},
                           {"displayTimeUnit", "ms"},
                           {"otherData", llvm::json::Object{{"makespan", number(sim.makespan * scale)},
                                                            {"bubble_fraction", number(sim.bubbleFraction)}}}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(trace)));
  return text;
}

} // namespace megac::pipeline
