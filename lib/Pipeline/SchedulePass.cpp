// megac-pipeline-schedule: the schedule of a plan, as a pipe.schedule op in the module.
#include "megac/Pipeline/Passes.h"
#include "megac/Pipeline/Schedule.h"
#include "pipe/ScheduleIR.h"

namespace megac::pipeline {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "megac/Pipeline/Passes.h.inc"
} // namespace megac::pipeline

using namespace mlir;
using namespace megac::pipeline;

namespace {

struct PipelineSchedulePass : public megac::pipeline::impl::PipelineScheduleBase<PipelineSchedulePass> {
  using PipelineScheduleBase::PipelineScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<ScheduleKind> kind =
        schedule.empty() ? (vpp > 1 ? ScheduleKind::Interleaved : ScheduleKind::OneFOneB)
                         : parseScheduleKind(schedule);
    if (!kind) {
      module.emitError() << "megac-pipeline-schedule: schedule \"" << schedule
                         << "\" is not a schedule: use gpipe, 1f1b or interleaved";
      return signalPassFailure();
    }
    if (module.lookupSymbol("schedule")) {
      module.emitError("megac-pipeline-schedule: the module already has a symbol @schedule");
      return signalPassFailure();
    }
    llvm::Expected<Schedule> built = buildSchedule(*kind, pp, vpp, microbatches);
    if (!built) {
      module.emitError() << llvm::toString(built.takeError());
      return signalPassFailure();
    }
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    megac::pipe::buildScheduleOp(builder, module.getLoc(), *built);
  }
};

} // namespace
