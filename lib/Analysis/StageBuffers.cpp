#include "megac/Analysis/StageBuffers.h"

#include "megac/Analysis/MemoryPlan.h"
#include "megac/Analysis/TensorBytes.h"
#include "megac/Plan/PlanDialect.h"
#include "megart/pipeline_buffers.h"
#include "pipe/PipeOps.h"
#include "pipe/ScheduleIR.h"
#include "tx/TxChunks.h"
#include "tx/TxNames.h"

#include <algorithm>

using namespace mlir;

namespace megac {

StashLayout stashLayout(TypeRange types) {
  StashLayout layout;
  for (Type t : types) {
    layout.offsets.push_back(layout.bytes);
    layout.bytes += alignUp(tensorBytes(t));
  }
  return layout;
}

ChunkBoundary chunkBoundary(func::FuncOp forward, bool first, bool last) {
  Type boundary = first ? forward.getResultTypes()[0] : forward.getArgumentTypes()[2];
  ChunkBoundary b;
  b.elementBytes = elementBytes(boundary);
  if (!first)
    b.inputBytes = cast<RankedTensorType>(forward.getArgumentTypes()[2]).getNumElements() * b.elementBytes;
  if (!last)
    b.outputBytes = cast<RankedTensorType>(forward.getResultTypes()[0]).getNumElements() * b.elementBytes;
  return b;
}

namespace {

FailureOr<int64_t> workspaceOf(func::FuncOp fn) {
  auto bytes = fn->getAttrOfType<IntegerAttr>(names::kWorkspaceBytesAttr);
  if (!bytes)
    return fn.emitOpError("has no workspace plan (megac-plan-workspace)");
  return bytes.getInt();
}

/// Each pipeline stage's workspace (its largest chunk function's) and executor buffers.
FailureOr<SmallVector<StageBuffers>> pipelineStageBuffers(ModuleOp module, const pipeline::Schedule &schedule) {
  const int64_t stages = schedule.stages, numChunks = schedule.stages * schedule.virtualStages;
  // Every stage's steps: when a stage's sent buffers come back depends on all of them.
  std::vector<std::vector<megart::PipelineStep>> allSteps(static_cast<size_t>(stages));
  for (int64_t s = 0; s < stages; ++s)
    for (const pipeline::Action &a : schedule.ranks[s])
      allSteps[s].push_back({static_cast<int32_t>(a.kind), static_cast<int32_t>(a.chunk), static_cast<int32_t>(a.peer)});
  const std::vector<std::vector<int64_t>> reclaim = megart::send_reclaim_steps(allSteps);
  SmallVector<StageBuffers> result;
  for (int64_t s = 0; s < stages; ++s) {
    StageBuffers buffers;
    std::vector<megart::PipelineChunkSizes> chunkSizes;
    for (func::FuncOp fn : tx::stageFunctions(module, s, stages)) {
      FailureOr<int64_t> workspace = workspaceOf(fn);
      if (failed(workspace))
        return failure();
      buffers.workspaceBytes = std::max(buffers.workspaceBytes, *workspace);
      if (isBackward(roleOf(fn)))
        continue;
      const int64_t c = *tx::chunkOf(fn);
      const ChunkBoundary b = chunkBoundary(fn, c == 0, c == numChunks - 1);
      chunkSizes.push_back({c, stashLayout(fn.getResultTypes().drop_front()).bytes, b.inputBytes, b.outputBytes});
    }
    // The executor's buffer pool, as the runtime sizes it (one shared definition).
    const megart::PipelineBufferPlan pool =
        megart::plan_pipeline_buffers(allSteps[s], chunkSizes, numChunks, reclaim[s]);
    buffers.activationBytes = pool.bytes(megart::PipelineBufferKind::Activations);
    buffers.communicationBytes = pool.bytes(megart::PipelineBufferKind::Communication);
    buffers.microbatches = schedule.microbatches;
    result.push_back(buffers);
  }
  return result;
}

} // namespace

FailureOr<SmallVector<StageBuffers>> stageBuffers(ModuleOp module) {
  auto model = module->getAttrOfType<DictionaryAttr>(names::kModelAttr);
  if (!model)
    return module.emitError("expected a module from the megac frontend (a ") << names::kModelAttr << " attribute)";
  auto dim = [&](StringRef key) { return cast<IntegerAttr>(model.get(key)).getInt(); };
  // Every plan's iteration is a pipeline schedule (pp = 1: one stage, one chunk).
  auto scheduleOps = module.getOps<pipe::ScheduleOp>();
  if (scheduleOps.empty())
    return module.emitError("the module needs its pipe.schedule (megac-pipeline-schedule)");
  llvm::Expected<pipeline::Schedule> schedule = pipe::scheduleFromOp(*scheduleOps.begin());
  if (!schedule)
    return module.emitError() << llvm::toString(schedule.takeError());
  FailureOr<SmallVector<StageBuffers>> result = pipelineStageBuffers(module, *schedule);
  if (failed(result))
    return failure();
  // Each microbatch's token ids and labels (int32) are uploaded with the iteration's others.
  for (StageBuffers &b : *result)
    b.dataBytesPerMicrobatch = 2 * 4 * dim("micro_batch_size") * dim("seq_length");
  return result;
}

} // namespace megac
