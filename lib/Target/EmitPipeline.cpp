#include "EmitPipeline.h"

#include "ProgramTables.h"
#include "megac/Analysis/MemoryPlan.h"
#include "megac/Analysis/StageBuffers.h"
#include "megac/Plan/PlanDialect.h"
#include "tx/TxChunks.h"
#include "tx/TxNames.h"
#include "tx/TxParamTable.h"

using namespace mlir;

namespace megac::emit {

namespace {

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
  FailureOr<SmallVector<StageBuffers>> buffers = stageBuffers(module);
  if (failed(buffers))
    return failure();
  std::string stageTable = "const megart::PipelineStageDesc kStages[] = {\n";
  for (int64_t s = 0; s < stages; ++s) {
    SmallVector<func::FuncOp> fns = tx::stageFunctions(module, s, stages);
    tx::ParamTable params(fns), frozen(fns, /*frozen=*/true);
    int64_t arena = 0;
    std::string chunkTable;
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
      const ChunkBoundary b = chunkBoundary(fn, first, last);
      const int64_t elementSize = b.elementBytes, inputNumel = b.inputBytes / elementSize,
                    outputNumel = b.outputBytes / elementSize;
      if (b.inputBytes % 4 != 0 || b.outputBytes % 4 != 0)
        return fn.emitOpError() << "passes " << (first ? outputNumel : inputNumel)
                                << " 16-bit elements between pipeline stages; the runtime sends whole fp32 words, so "
                                   "micro batch x sequence x hidden size must be even";
      const int64_t stashBytes = stashLayout(fn.getResultTypes().drop_front()).bytes;
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
    plan << "stage " << s << ": pipeline buffers: stashes " << (*buffers)[s].activationBytes
         << " bytes, sent and received " << (*buffers)[s].communicationBytes << " bytes\n";
  }
  os << stageTable << "};\n\n";
  ProgramFields fields;
  fields.stages = "kStages";
  fields.numMicrobatches = schedule.microbatches;
  fields.schedule = cString(pipeline::scheduleKindName(schedule.kind));
  fields.virtualStages = schedule.virtualStages;
  return fields;
}

} // namespace megac::emit
