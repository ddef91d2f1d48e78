// megac-pipeline-schedule: the plan's schedule, as a pipe.schedule op in the module.
#include "megac/Pipeline/Passes.h"
#include "megac/Plan/PlanIR.h"
#include "pipe/ScheduleIR.h"
#include "pipe/schedule/Schedule.h"
#include "tx/TxNames.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "megac-pipeline-schedule"

namespace megac::pipeline {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "megac/Pipeline/Passes.h.inc"
} // namespace megac::pipeline

using namespace mlir;
using namespace megac::pipeline;

namespace {

struct PipelineSchedulePass : public megac::pipeline::impl::PipelineScheduleBase<PipelineSchedulePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<megac::ParallelPlan> plan = megac::readPlan(module, getArgument());
    if (failed(plan))
      return signalPassFailure();
    // Every plan's iteration is a schedule. pp = 1 is one stage with one chunk, forward then
    // backward per microbatch (Megatron's forward_backward_no_pipelining); its microbatches are
    // the runtime's --global-batch-size's, so the schedule is compiled for one and runs once per
    // microbatch (see pipe.schedule). #megac.plan has a kind and microbatches whenever pp > 1.
    const bool oneStage = plan->pp == 1;
    const ScheduleKind kind = oneStage ? ScheduleKind::OneFOneB : *plan->pipelineSchedule;
    const int64_t microbatches = oneStage ? 1 : plan->numMicrobatches;
    if (module.lookupSymbol(megac::names::kSchedule)) {
      module.emitError() << getArgument() << ": the module already has a symbol @" << megac::names::kSchedule;
      return signalPassFailure();
    }
    llvm::Expected<Schedule> built = buildSchedule(kind, static_cast<int>(plan->pp), static_cast<int>(plan->vpp),
                                                   static_cast<int>(microbatches));
    if (!built) {
      module.emitError() << llvm::toString(built.takeError());
      return signalPassFailure();
    }
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << scheduleKindName(kind) << " over " << plan->pp << " x " << plan->vpp
                            << " chunks, " << microbatches << " microbatches\n");
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    Location loc = FusedLoc::get(module.getContext(), {module.getLoc()}, builder.getStringAttr(getArgument()));
    megac::pipe::buildScheduleOp(builder, loc, *built);
  }
};

} // namespace
