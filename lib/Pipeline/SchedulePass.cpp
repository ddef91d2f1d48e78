// megac-pipeline-schedule: the plan's schedule, as a pipe.schedule op in the module.
#include "megac/Pipeline/Passes.h"
#include "megac/Plan/PlanIR.h"
#include "pipe/ScheduleIR.h"
#include "pipe/schedule/Schedule.h"
#include "tx/TxChunks.h"
#include "tx/TxNames.h"
#include "tx/TxParamTable.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "megac-pipeline-schedule"

namespace megac::pipeline {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "megac/Pipeline/Passes.h.inc"
} // namespace megac::pipeline

using namespace mlir;
using namespace megac::pipeline;

namespace {

/// Per pipeline rank, whether its chunks hold a weight another rank's chunks hold too (GPT-2's
/// word embedding, which the last stage's LM head reads). With one stage, or without chunk
/// functions (a module of the schedule alone), none does.
std::vector<bool> holdsTiedWeights(ModuleOp module, int64_t stages) {
  std::vector<bool> holds(static_cast<size_t>(stages), false);
  if (stages < 2 || !megac::tx::hasChunkFunctions(module))
    return holds;
  std::vector<llvm::StringSet<>> names(static_cast<size_t>(stages));
  llvm::StringMap<int64_t> holders;
  for (int64_t s = 0; s < stages; ++s) {
    const megac::tx::ParamTable table(megac::tx::stageFunctions(module, s, stages));
    for (megac::tx::ParamOp p : table.all())
      if (names[s].insert(p.getName()).second)
        ++holders[p.getName()];
  }
  for (int64_t s = 0; s < stages; ++s)
    for (const auto &name : names[s])
      if (holders[name.getKey()] > 1)
        holds[s] = true;
  return holds;
}

/// What closes a rank's iteration under `plan`, in order: the runtime runs these and decides
/// none of them.
std::vector<ClosingKind> closingActions(const megac::ParallelPlan &plan, bool holdsTied) {
  using megac::ShardingStrategy;
  // The distributed optimizer's flat layout (megac-data-parallel makes one only over dp > 1).
  const bool sharded = plan.dp > 1 && plan.sharding != ShardingStrategy::NoShard;
  std::vector<ClosingKind> closing;
  // A tied weight's gradients are summed between its copies before the sync where the plain
  // distributed optimizer's reduce-scatter would leave each stage a different shard of it; on the
  // reduced shards where the sync left only those (tiedGradsOnShards); else after the dp sum, as
  // Megatron does (the copies then add the same totals).
  const bool onShards = sharded && plan.tiedGradsOnShards();
  if (holdsTied && sharded && !onShards)
    closing.push_back(ClosingKind::TiedSum);
  closing.push_back(ClosingKind::GradSync);
  if (holdsTied && !(sharded && !onShards))
    closing.push_back(onShards ? ClosingKind::TiedSumShards : ClosingKind::TiedSum);
  closing.push_back(ClosingKind::OptimizerStep);
  // Each rank stepped its shard: the shard group gathers the updated parameters, except ZeRO-3's,
  // which stay sharded (each function gathers what it uses).
  if (sharded && plan.shardedState() != ShardingStrategy::OptimGradsParams)
    closing.push_back(ClosingKind::ParamGather);
  return closing;
}

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
    const std::vector<bool> tied = holdsTiedWeights(module, plan->pp);
    for (size_t r = 0; r < built->ranks.size(); ++r)
      built->closing.push_back(closingActions(*plan, tied[r]));
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << scheduleKindName(kind) << " over " << plan->pp << " x " << plan->vpp
                            << " chunks, " << microbatches << " microbatches\n");
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    Location loc = FusedLoc::get(module.getContext(), {module.getLoc()}, builder.getStringAttr(getArgument()));
    megac::pipe::buildScheduleOp(builder, loc, *built);
  }
};

} // namespace
