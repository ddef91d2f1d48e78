#include "megac/Target/EmitCpp.h"
#include "megac/Frontend/PlanIR.h"

#include "EmitPipeline.h"
#include "FunctionEmitter.h"
#include "ProgramTables.h"
#include "pipe/ScheduleIR.h"
#include "tx/TxNames.h"
#include "tx/TxParamTable.h"

#include "llvm/Support/Format.h"

using namespace mlir;
using namespace megac;
using namespace megac::emit;

namespace {

/// @train_step: one microbatch's forward and backward, the runtime's StepFn.
Signature trainStepSignature(func::FuncOp fn) {
  Signature sig;
  sig.prototype = "float train_step(const megart::StepContext &ctx, float *const *params, float *const *grads, "
                  "char *ws,\n                 const int32_t *ids, const int32_t *labels, float dloss) {";
  sig.args = {"ids", "labels", kDlossArg};
  sig.results.assign(fn.getNumResults(), "");
  sig.hasParams = true;
  sig.returnedScalar = 0;
  return sig;
}

bool isProgramFunction(func::FuncOp fn) {
  return fn.getName() == names::kTrainStep || fn.getName().starts_with(names::kSyncGradients) ||
         tx::isChunkFunction(fn);
}

} // namespace

LogicalResult megac::emitTrainingProgram(ModuleOp module, const EmitOptions &options, llvm::raw_ostream &os,
                                         llvm::raw_ostream &plan) {
  auto model = module->getAttrOfType<DictionaryAttr>(names::kModelAttr);
  auto entryFn = module.lookupSymbol<func::FuncOp>(names::kTrainStep);
  bool pipelined = tx::pipelineStages(module) > 1;
  if (!model || (!entryFn && !pipelined))
    return module.emitError("emit: expected a module from the megac frontend after megac-autodiff "
                            "(a " + names::kModelAttr + " attribute and @" + names::kTrainStep + ")");
  if (entryFn && (entryFn.getNumArguments() != 3 || entryFn.getNumResults() != 1))
    return entryFn.emitOpError("train_step must take (ids, labels, dloss) and return the loss");
  auto dim = [&](StringRef key) { return cast<IntegerAttr>(model.get(key)).getInt(); };
  FailureOr<ParallelPlan> parallelPlan = readPlan(module, "emit");
  if (failed(parallelPlan))
    return failure();

  const bool cuda = options.target == Target::Cuda;
  os << options.header;
  if (cuda)
    os << "#include \"megart/cuda/device.h\"\n#include \"megart/cuda/kernels.h\"\n#include \"megart/program.h\"\n\n"
          "namespace {\n\nusing namespace megart::cuda;\n\n";
  else
    os << "#include \"megart/kernels.h\"\n#include \"megart/layout_kernels.h\"\n#include \"megart/parallel_kernels.h\"\n"
          "#include \"megart/program.h\"\n\n#include <cstring>\n\nnamespace {\n\nusing namespace megart::cpu;\n\n";
  // Callees first: a caller needs their workspace sizes.
  llvm::StringMap<int64_t> scratch;
  tx::ParamTable noParams;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (isProgramFunction(fn))
      continue;
    for (auto [i, t] : llvm::enumerate(fn.getArgumentTypes())) // calleeSignature passes floats
      if (auto tensor = dyn_cast<RankedTensorType>(t); !tensor || !tensor.getElementType().isF32())
        return fn.emitOpError() << "argument " << i << " has type " << t << "; the C++ emitter handles f32 tensors only";
    Signature sig = calleeSignature(fn);
    sig.target = options.target;
    FailureOr<int64_t> bytes = emitFunction(fn, sig, noParams, scratch, os, plan);
    if (failed(bytes))
      return failure();
    scratch[fn.getName()] = *bytes;
  }

  // megac-data-parallel placed the bucket starts in the step itself (--overlap-grad-reduce).
  bool overlaps = false;
  module.walk([&](tx::StartGradSyncOp) { overlaps = true; });
  ProgramFields fields;
  if (pipelined) {
    // The schedule the stages run is the module's verified pipe.schedule.
    auto ops = module.getOps<pipe::ScheduleOp>();
    if (ops.empty())
      return module.emitError("emit: a pipelined module needs its pipe.schedule (megac-pipeline-schedule)");
    llvm::Expected<pipeline::Schedule> schedule = pipe::scheduleFromOp(*ops.begin());
    if (!schedule)
      return module.emitError() << "emit: " << llvm::toString(schedule.takeError());
    FailureOr<ProgramFields> stages = emitPipelineStages(module, *schedule, scratch, options.target, os, plan);
    if (failed(stages))
      return failure();
    fields = *stages;
  } else {
    tx::ParamTable params(entryFn); // the numbering passes refer to
    Signature sig = trainStepSignature(entryFn);
    sig.target = options.target;
    FailureOr<int64_t> bytes = emitFunction(entryFn, sig, params, scratch, os, plan);
    if (failed(bytes))
      return failure();
    auto syncFn = module.lookupSymbol<func::FuncOp>(names::kSyncGradients);
    if (syncFn && failed(emitSyncGradients(syncFn, params, os)))
      return failure();
    emitParamTable("kParams", params, os);
    fields.params = "kParams";
    fields.numParams = params.size();
    fields.arenaBytes = *bytes;
    fields.step = names::kTrainStep.str();
    fields.syncGradients = syncFn ? names::kSyncGradients.str() : "nullptr";
  }
  os << "const megart::ProgramDesc kProgram = {\n"
     << "    " << cString(options.summary) << ",\n"
     << "    /*micro_batch_size=*/" << dim("micro_batch_size") << ", /*seq_length=*/" << dim("seq_length")
     << ", /*vocab_size=*/" << dim("vocab_size") << ",\n"
     << "    /*model_flops_per_sample=*/"
     << cast<IntegerAttr>(model.get("flops_per_sample")).getInt() << ".0,\n"
     << "    " << fields.params << ", " << fields.numParams << ", /*arena_bytes=*/" << fields.arenaBytes << ", "
     << fields.step << ",\n"
     << "    /*tensor_parallel_size=*/" << parallelPlan->tp << ", /*pipeline_parallel_size=*/" << parallelPlan->pp
     << ", /*data_parallel_size=*/" << parallelPlan->dp << ",\n"
     << "    /*sync_gradients=*/" << fields.syncGradients << ",\n"
     << "    /*stages=*/" << fields.stages << ", /*num_microbatches=*/" << fields.numMicrobatches
     << ", /*pipeline_schedule=*/" << fields.schedule << ", /*virtual_pipeline_size=*/" << fields.virtualStages
     << ",\n    /*device=*/" << (cuda ? "megart::cuda::device" : "nullptr")
     << ", /*overlap_grad_reduce=*/" << (overlaps ? "true" : "false") << "};\n\n"
     << "} // namespace\n\nint main(int argc, char **argv) { return megart::train_main(argc, argv, kProgram); }\n";
  plan << "arena: " << fields.arenaBytes << " bytes (" << llvm::format("%.1f", fields.arenaBytes / 1048576.0)
       << " MiB)\n";
  return success();
}
