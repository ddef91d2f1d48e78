// megac-print-pipeline-schedule: what a schedule does, in words a user reads first.
#include "megac/Pipeline/Passes.h"
#include "pipe/schedule/Schedule.h"
#include "pipe/ScheduleIR.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <tuple>

namespace megac::pipeline {
#define GEN_PASS_DEF_PRINTPIPELINESCHEDULE
#include "megac/Pipeline/Passes.h.inc"
} // namespace megac::pipeline

using namespace mlir;
using namespace megac::pipeline;

namespace {

constexpr double kMaxSimulatedTime = 1e12;

std::string formatNumber(double value) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%g", value);
  return text;
}

struct PrintPipelineSchedulePass : public megac::pipeline::impl::PrintPipelineScheduleBase<PrintPipelineSchedulePass> {
  using PrintPipelineScheduleBase::PrintPipelineScheduleBase;

  void runOnOperation() override {
    // The simulation adds these up over every (chunk, microbatch): finite, and small enough that
    // the sums stay finite.
    for (auto [name, value, zeroAllowed] : {std::tuple{"tf", double(tf), false}, {"tb", double(tb), false},
                                            {"tcomm", double(tcomm), true}})
      if (!std::isfinite(value) || value < 0 || (value == 0 && !zeroAllowed) || value > kMaxSimulatedTime) {
        getOperation().emitError() << getArgument() << ": option " << name << "="
                                   << formatNumber(value) << " must be "
                                   << (zeroAllowed ? ">= 0" : "> 0") << " and at most 1e12"
                                   << " (a time in any unit, e.g. " << name << "=" << (zeroAllowed ? "0.1" : "1.5")
                                   << ")";
        return signalPassFailure();
      }
    llvm::raw_ostream &os = llvm::outs();
    getOperation().walk([&](megac::pipe::ScheduleOp op) {
      // The op verifier has run, so the schedule reads back and is valid.
      llvm::Expected<Schedule> s = megac::pipe::scheduleFromOp(op);
      if (!s) {
        op.emitError(llvm::toString(s.takeError()));
        return signalPassFailure();
      }
      Simulation sim = simulate(*s, tf, tb, tcomm);
      if (trace) {
        os << chromeTraceJson(*s, sim) << "\n";
        return;
      }
      os << "pipe.schedule @" << op.getSymName() << ": " << scheduleKindName(s->kind)
         << ", P = " << s->stages << ", V = " << s->virtualStages << ", m = " << s->microbatches
         << "\n";
      os << (comms ? formatScheduleTextWithComms(*s) : formatScheduleText(*s));
      os << llvm::format("bubble: %g (makespan %g, compute %g per rank; tf %g, tb %g, tcomm %g)\n",
                         sim.bubbleFraction, sim.makespan, sim.busyPerRank, double(tf), double(tb),
                         double(tcomm));
      std::vector<int64_t> peaks = peakStash(*s);
      os << "stash peak (bound):";
      for (int r = 0; r < s->stages; ++r)
        os << (r ? ", " : " ") << "rank " << r << " " << peaks[r] << " (" << stashBound(*s, r) << ")";
      os << "\n";
    });
  }
};

} // namespace
