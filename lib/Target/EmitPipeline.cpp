#include "EmitPipeline.h"

#include "ProgramTables.h"
#include "megac/Analysis/MemoryPlan.h"
#include "megac/Plan/PlanDialect.h"
#include "megart/pipeline_buffers.h"
#include "tx/TxChunks.h"
#include "tx/TxNames.h"
#include "tx/TxParamTable.h"

using namespace mlir;

namespace megac::emit {

namespace {

/// Where each stashed value lives in a chunk's stash (64-byte aligned, like every buffer).
struct StashLayout {
  SmallVector<int64_t> offsets;
  int64_t bytes = 0;
};

StashLayout stashLayout(TypeRange types) {
  StashLayout layout;
  for (Type t : types) {
    layout.offsets.push_back(layout.bytes);
    layout.bytes += alignUp(tensorBytes(t));
  }
  return layout;
}

/// `T *<name> = <where in the stash>` for stashed value `v` (T its C++ element type), named as
/// in the IR.
std::string stashPointer(Signature &sig, bool constant, Value v, int64_t offset, std::string &name) {
  std::string type = (constant ? "const " : "") + cppElementType(v.getType());
  name = sig.names.take(v, "stashed");
  return "  " + type + " *" + name + " = reinterpret_cast<" + type + " *>(stash + " + std::to_string(offset) +
         "); // " + typeString(v.getType()) + "\n";
}

/// The expression a chunk function uses for one of its activation arguments `raw` (`input`,
/// `output`, ...: float pointers in the runtime's ABI) holding a tensor of `type`: `raw` itself for
/// f32, else a 16-bit view declared in the prologue.
std::string boundaryBuffer(Signature &sig, Type type, bool constant, StringRef raw) {
  const std::string element = cppElementType(type);
  if (element == "float")
    return raw.str();
  const std::string name = sig.names.take((raw + "_" + StringRef(element).rsplit("::").second.drop_back(2)).str());
  const std::string pointer = (constant ? "const " : "") + element + " *";
  sig.prologue += "  " + pointer + name + " = reinterpret_cast<" + pointer + ">(" + raw.str() + "); // " +
                  typeString(type) + "\n";
  return name;
}

/// @chunk<c>_forward(ids, labels[, input]) -> (output | loss, stash...): ChunkForwardFn.
Signature forwardSignature(func::FuncOp fn, bool first, bool last) {
  Signature sig;
  sig.prototype = "float " + fn.getName().str() +
                  "(const megart::StepContext &ctx, float *const *params, char *ws,\n"
                  "    const int32_t *ids, const int32_t *labels, const float *input, float *output, char *stash) {";
  sig.args = {"ids", "labels"};
  if (!first)
    sig.args.push_back(boundaryBuffer(sig, fn.getArgumentTypes()[2], /*constant=*/true, "input"));
  sig.results.push_back(last ? "" : boundaryBuffer(sig, fn.getResultTypes()[0], /*constant=*/false, "output"));
  ValueRange stashed = fn.getBody().front().getTerminator()->getOperands().drop_front();
  StashLayout layout = stashLayout(stashed.getTypes());
  for (auto [i, v] : llvm::enumerate(stashed)) {
    std::string name;
    sig.prologue += stashPointer(sig, /*constant=*/false, v, layout.offsets[i], name);
    sig.results.push_back(name);
  }
  sig.hasParams = true;
  sig.returnedScalar = last ? 0 : -1;
  sig.returnDefault = "0.0f";
  return sig;
}

/// @chunk<c>_backward(ids, labels, dloss, stash...[, output_grad]) -> ([input_grad]):
/// ChunkBackwardFn.
Signature backwardSignature(func::FuncOp fn, int64_t numStashed, bool first, bool last) {
  Signature sig;
  sig.prototype = "void " + fn.getName().str() +
                  "(const megart::StepContext &ctx, float *const *params, float *const *grads, char *ws,\n"
                  "    const int32_t *ids, const int32_t *labels, float dloss, const char *stash,\n"
                  "    const float *output_grad, float *input_grad) {";
  sig.args = {"ids", "labels", kDlossArg};
  ValueRange stashed = fn.getArguments().slice(3, numStashed);
  StashLayout layout = stashLayout(stashed.getTypes());
  for (auto [i, v] : llvm::enumerate(stashed)) {
    std::string name;
    sig.prologue += stashPointer(sig, /*constant=*/true, v, layout.offsets[i], name);
    sig.args.push_back(name);
  }
  if (!last)
    sig.args.push_back(boundaryBuffer(sig, fn.getArgumentTypes().back(), /*constant=*/true, "output_grad"));
  if (!first)
    sig.results.push_back(boundaryBuffer(sig, fn.getResultTypes()[0], /*constant=*/false, "input_grad"));
  sig.hasParams = true;
  return sig;
}

/// Prints rank `rank` of `schedule` as the runtime's table `const megart::PipeOp <name>[]`: its
/// actions, then its closing ones. Returns the table's length.
int64_t emitScheduleTable(const pipeline::Schedule &schedule, int64_t rank, StringRef name, llvm::raw_ostream &os) {
  const std::vector<pipeline::Action> &actions = schedule.ranks[rank];
  const std::vector<pipeline::ClosingKind> &closing = schedule.closing[rank];
  os << "// pipeline rank " << rank << ": " << actions.size() << " steps per round of " << schedule.microbatches
     << " microbatches, then " << closing.size() << " closing the iteration\n";
  os << "const megart::PipeOp " << name << "[] = {\n";
  for (const pipeline::Action &a : actions)
    os << "    {.kind = megart::PipeOpKind::" << pipeline::actionKindName(a.kind) << ", .chunk = " << a.chunk
       << ", .microbatch = " << a.microbatch << ", .peer = " << a.peer << "},\n";
  for (pipeline::ClosingKind k : closing)
    os << "    {.kind = megart::PipeOpKind::" << pipeline::closingKindName(k) << ", .chunk = -1, .microbatch = -1, "
       << ".peer = -1},\n";
  os << "};\n\n";
  return static_cast<int64_t>(actions.size() + closing.size());
}

} // namespace

FailureOr<ProgramFields> emitPipelineStages(ModuleOp module, const ParallelPlan &parallelPlan,
                                            const pipeline::Schedule &schedule, Target target, llvm::raw_ostream &os,
                                            llvm::raw_ostream &plan) {
  const int64_t stages = parallelPlan.pp;
  int64_t numChunks = 0;
  for (auto fn : module.getOps<func::FuncOp>())
    if (tx::chunkOf(fn) && !isBackward(roleOf(fn)))
      ++numChunks;
  if (schedule.stages != stages || schedule.stages * schedule.virtualStages != numChunks)
    return module.emitError() << "emit: the schedule is for " << schedule.stages << " x " << schedule.virtualStages
                              << " chunks but the plan has pp " << stages << " and megac-pipeline-split made "
                              << numChunks << " chunks";
  std::vector<int64_t> peaks = pipeline::peakStash(schedule);
  // Every stage's steps: when a stage's sent buffers come back depends on all of them.
  std::vector<std::vector<megart::PipelineStep>> allSteps(static_cast<size_t>(stages));
  for (int64_t s = 0; s < stages; ++s)
    for (const pipeline::Action &a : schedule.ranks[s])
      allSteps[s].push_back({static_cast<int32_t>(a.kind), static_cast<int32_t>(a.chunk), static_cast<int32_t>(a.peer)});
  const std::vector<std::vector<int64_t>> reclaim = megart::send_reclaim_steps(allSteps);
  std::string stageTable = "const megart::PipelineStageDesc kStages[] = {\n";
  SmallVector<StageBuffers> stageBuffers;
  for (int64_t s = 0; s < stages; ++s) {
    SmallVector<func::FuncOp> fns = tx::stageFunctions(module, s, stages);
    tx::ParamTable params(fns), frozen(fns, /*frozen=*/true);
    int64_t arena = 0;
    std::string chunkTable;
    std::vector<megart::PipelineChunkSizes> chunkSizes;
    for (func::FuncOp fn : fns) {
      int64_t c = *tx::chunkOf(fn);
      int64_t numStashed = fn->getAttrOfType<IntegerAttr>(names::kStashAttr).getInt();
      bool first = c == 0, last = c == numChunks - 1, backward = isBackward(roleOf(fn));
      Signature sig = backward ? backwardSignature(fn, numStashed, first, last) : forwardSignature(fn, first, last);
      sig.target = target;
      sig.frozenParams = &frozen;
      FailureOr<int64_t> bytes = emitFunction(fn, sig, params, os, plan);
      if (failed(bytes))
        return failure();
      arena = std::max(arena, *bytes);
      if (backward)
        continue;
      // The residual stream passed between chunks: its elements, in fp32 or 16 bits.
      Type boundary = first ? fn.getResultTypes()[0] : fn.getArgumentTypes()[2];
      const int64_t elementSize = elementBytes(boundary);
      int64_t inputNumel = first ? 0 : cast<RankedTensorType>(fn.getArgumentTypes()[2]).getNumElements();
      int64_t outputNumel = last ? 0 : cast<RankedTensorType>(fn.getResultTypes()[0]).getNumElements();
      if ((inputNumel * elementSize) % 4 != 0 || (outputNumel * elementSize) % 4 != 0)
        return fn.emitOpError() << "passes " << (first ? outputNumel : inputNumel)
                                << " 16-bit elements between pipeline stages; the runtime sends whole fp32 words, so "
                                   "micro batch x sequence x hidden size must be even";
      const int64_t stashBytes = stashLayout(fn.getResultTypes().drop_front()).bytes;
      chunkSizes.push_back({c, stashBytes, inputNumel * elementSize, outputNumel * elementSize});
      std::string name = names::chunkName(c);
      chunkTable += "    {.chunk = " + std::to_string(c) + ", .forward = " + names::forwardHalf(name) +
                    ", .backward = " + names::backwardHalf(name) +
                    ", .stash_bytes = " + std::to_string(stashBytes) +
                    ", .input_numel = " + std::to_string(inputNumel) +
                    ", .output_numel = " + std::to_string(outputNumel) +
                    ", .element_bytes = " + std::to_string(elementSize) + "},\n";
    }
    std::string prefix = "kStage" + std::to_string(s);
    std::string sync = "nullptr", flatFields;
    if (auto syncFn = module.lookupSymbol<func::FuncOp>(names::stageSyncName(s))) {
      if (failed(emitSyncGradients(syncFn, params, os)))
        return failure();
      sync = syncFn.getName().str();
      FailureOr<std::string> sharded = emitShardedFields(module, syncFn, names::stageGatherName(s), prefix, os);
      if (failed(sharded))
        return failure();
      flatFields = *sharded;
    }
    emitParamTable(prefix + "Params", params, os);
    std::string frozenFields;
    if (frozen.size() > 0) {
      emitParamTable(prefix + "FrozenParams", frozen, os);
      frozenFields = ", .frozen_params = " + prefix + "FrozenParams, .num_frozen_params = " +
                     std::to_string(frozen.size());
    }
    os << "const megart::ChunkDesc " << prefix << "Chunks[] = {\n" << chunkTable << "};\n\n";
    const int64_t numOps = emitScheduleTable(schedule, s, prefix + "Ops", os);
    stageTable += "    {.params = " + prefix + "Params, .num_params = " + std::to_string(params.size()) +
                  ", .arena_bytes = " + std::to_string(arena) + ",\n     .chunks = " + prefix +
                  "Chunks, .num_chunks = " + std::to_string(fns.size() / 2) + ", .ops = " + prefix +
                  "Ops, .num_ops = " + std::to_string(numOps) +
                  ", .predicted_peak_stash = " + std::to_string(peaks[s]) + ", .sync_gradients = " + sync +
                  flatFields + frozenFields + "},\n";
    plan << "stage " << s << ": arena " << arena << " bytes\n";
    // The executor's buffer pool, as the runtime sizes it (one shared definition).
    const megart::PipelineBufferPlan pool =
        megart::plan_pipeline_buffers(allSteps[s], chunkSizes, numChunks, reclaim[s]);
    StageBuffers buffers;
    buffers.workspaceBytes = arena;
    buffers.activationBytes = pool.bytes(megart::PipelineBufferKind::Activations);
    buffers.communicationBytes = pool.bytes(megart::PipelineBufferKind::Communication);
    buffers.microbatches = schedule.microbatches;
    stageBuffers.push_back(buffers);
    plan << "stage " << s << ": pipeline buffers: stashes " << buffers.activationBytes << " bytes, sent and received "
         << buffers.communicationBytes << " bytes\n";
  }
  os << stageTable << "};\n\n";
  ProgramFields fields;
  fields.stages = "kStages";
  fields.numMicrobatches = schedule.microbatches;
  fields.schedule = cString(pipeline::scheduleKindName(schedule.kind));
  fields.virtualStages = schedule.virtualStages;
  fields.buffers = std::move(stageBuffers);
  return fields;
}

} // namespace megac::emit
