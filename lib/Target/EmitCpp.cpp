#include "megac/Target/EmitCpp.h"
#include "megac/Plan/PlanIR.h"

#include "EmitPipeline.h"
#include "FunctionEmitter.h"
#include "ProgramTables.h"
#include "pipe/ScheduleIR.h"
#include "tx/TxChunks.h"
#include "tx/TxExpertLoad.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"
#include "tx/TxParamTable.h"


using namespace mlir;
using namespace megac;
using namespace megac::emit;

namespace {

/// @logits_step: one microbatch's logits [b, s, padded vocab], for generation.
Signature logitsStepSignature(func::FuncOp fn) {
  Signature sig;
  sig.prototype = "void logits_step(const megart::StepContext &ctx, float *const *params, char *ws,\n"
                  "                 const int32_t *ids, float *logits) {";
  sig.args = {"ids", "nullptr"}; // chunk 0's forward(ids, labels): no labels, nothing reads them
  sig.results = {"logits"};
  sig.hasParams = true;
  return sig;
}

/// decode_step: one position's logits [b, 1, padded vocab] with the KV cache in ctx.
Signature decodeStepSignature() {
  Signature sig;
  sig.prototype = "void decode_step(const megart::StepContext &ctx, float *const *params, char *ws,\n"
                  "                 const int32_t *ids, float *logits) {";
  sig.args = {"ids", "nullptr"}; // the frontend's forward(ids, labels): no labels
  sig.results = {"logits"};
  sig.hasParams = true;
  sig.decode = true;
  return sig;
}

/// decode_step and its callees from `decode`, the frontend's module of the spec built for
/// seq_length 1 after megac-derive-decode-step. Its parameters must be the training step's
/// `params`, in their order (same names, same blocks). Returns the workspace bytes decode_step
/// needs and sets `kvRow`, the floats one position of one sample keeps in a layer's cache (kv
/// heads x head dim).
FailureOr<int64_t> emitDecodeStep(ModuleOp decode, const tx::ParamTable &params, raw_ostream &os,
                                  raw_ostream &plan, int64_t &kvRow) {
  kvRow = 0;
  decode.walk([&](tx::AttentionOp a) {
    ArrayRef<int64_t> key = cast<RankedTensorType>(a.getKey().getType()).getShape(); // [b, 1, kv heads, head dim]
    kvRow = key[2] * key[3];
  });
  auto step = decode.lookupSymbol<func::FuncOp>(names::kDecodeStep);
  if (!step)
    return decode.emitError("emit: the decode module has no @") << names::kDecodeStep << " (megac-derive-decode-step)";
  tx::ParamTable decodeParams(step);
  if (decodeParams.size() != params.size())
    return decode.emitError() << "emit: the decode module declares " << decodeParams.size()
                              << " parameters, the training step " << params.size();
  for (int64_t i = 0; i < params.size(); ++i)
    if (decodeParams[i].getName() != params[i].getName() || decodeParams[i].getOffsets() != params[i].getOffsets())
      return decodeParams[i].emitOpError() << "is parameter " << i << " of the decode module, but the training "
                                           << "step's is " << params[i].getName();
  tx::ParamTable noParams;
  for (auto fn : decode.getOps<func::FuncOp>())
    if (fn != step && failed(emitFunction(fn, calleeSignature(fn, /*decode=*/true), noParams, os, plan)))
      return failure();
  return emitFunction(step, decodeStepSignature(), decodeParams, os, plan);
}

bool isProgramFunction(func::FuncOp fn) {
  return fn.getName() == names::kLogitsStep || fn.getName().starts_with(names::kSyncGradients) ||
         fn.getName().starts_with(names::kGatherParams) ||
         tx::chunkOf(fn).has_value();
}

} // namespace

LogicalResult megac::emitTrainingProgram(ModuleOp module, const EmitOptions &options, llvm::raw_ostream &os,
                                         llvm::raw_ostream &plan) {
  auto model = module->getAttrOfType<DictionaryAttr>(names::kModelAttr);
  if (!model || !tx::hasChunkFunctions(module))
    return module.emitError("emit: expected a module from the megac frontend after megac-pipeline-split (a " +
                            names::kModelAttr + " attribute and chunk functions)");
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
    os << "#include \"megart/cpu_program.h\" // the first include: the runtime's build precompiles it\n\n"
          "namespace {\n\nusing namespace megart::cpu;\n\n";
  // Callees first, as a reader looks them up.
  tx::ParamTable noParams;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (isProgramFunction(fn))
      continue;
    for (auto [i, t] : llvm::enumerate(fn.getArgumentTypes())) // calleeSignature passes typed buffers
      if (!isa<RankedTensorType>(t) || cppElementType(t).empty())
        return fn.emitOpError() << "argument " << i << " has type " << t
                                << "; the C++ emitter handles f32, bf16, f16 and i32 tensors only";
    Signature sig = calleeSignature(fn);
    sig.target = options.target;
    if (failed(emitFunction(fn, sig, noParams, os, plan)))
      return failure();
  }

  // megac-data-parallel placed the bucket starts in the step itself (--overlap-grad-reduce).
  bool overlaps = false, gathersOverlap = false;
  module.walk([&](tx::StartGradSyncOp) { overlaps = true; });
  module.walk([&](tx::WaitParamGatherOp) { gathersOverlap = true; });
  // What every rank runs is the module's verified pipe.schedule (every plan has one).
  auto scheduleOps = module.getOps<pipe::ScheduleOp>();
  if (scheduleOps.empty())
    return module.emitError("emit: the module needs its pipe.schedule (megac-pipeline-schedule)");
  llvm::Expected<pipeline::Schedule> schedule = pipe::scheduleFromOp(*scheduleOps.begin());
  if (!schedule)
    return module.emitError() << "emit: " << llvm::toString(schedule.takeError());
  FailureOr<ProgramFields> stages = emitPipelineStages(module, *parallelPlan, *schedule, options.target, os, plan);
  if (failed(stages))
    return failure();
  ProgramFields fields = *stages;
  // Generation's steps (one rank, fp32) read stage 0's parameter table, in a workspace of their own.
  if (auto logitsFn = module.lookupSymbol<func::FuncOp>(names::kLogitsStep)) {
    SmallVector<func::FuncOp> stage = tx::stageFunctions(module, 0, 1);
    tx::ParamTable params(stage), frozen(stage, /*frozen=*/true);
    Signature logitsSig = logitsStepSignature(logitsFn);
    logitsSig.target = options.target;
    logitsSig.frozenParams = &frozen;
    FailureOr<int64_t> logitsBytes = emitFunction(logitsFn, logitsSig, params, os, plan);
    if (failed(logitsBytes))
      return failure();
    fields.logitsStep = names::kLogitsStep.str();
    fields.generationArenaBytes = *logitsBytes;
    if (options.decodeModule && !cuda) {
      FailureOr<int64_t> decodeBytes = emitDecodeStep(options.decodeModule, params, os, plan, fields.kvCacheRow);
      if (failed(decodeBytes))
        return failure();
      fields.decodeStep = names::kDecodeStep.str();
      fields.kvCacheLayers = dim("num_layers");
      fields.generationArenaBytes = std::max(fields.generationArenaBytes, *decodeBytes);
    }
  }
  // The program's description, field by field (the runtime's megart/program.h says what each is).
  auto field = [&](StringRef name, const Twine &value) { os << "    ." << name << " = " << value << ",\n"; };
  os << "const megart::ProgramDesc kProgram = {\n";
  field("summary", cString(options.summary));
  field("micro_batch_size", Twine(dim("micro_batch_size")));
  field("seq_length", Twine(dim("seq_length")));
  field("vocab_size", Twine(dim("vocab_size")));
  if (model.get("masked_lm"))
    field("masked_lm", "true");
  unsigned reported = 0; // the metrics a chunk reports (tx.metric)
  module.walk([&](tx::MetricOp m) { reported |= 1u << static_cast<unsigned>(m.getMetric()); });
  if (reported)
    field("reported_metrics", Twine(reported) + "u");
  if (std::optional<tx::ExpertLoadShape> load = tx::expertLoadShape(module)) {
    field("expert_load_layers", Twine(load->layers));
    field("expert_load_experts", Twine(load->experts));
  }
  field("model_flops_per_sample", Twine(cast<IntegerAttr>(model.get("flops_per_sample")).getInt()) + ".0");
  field("logits_step", fields.logitsStep);
  field("decode_step", fields.decodeStep);
  field("kv_cache_layers", Twine(fields.kvCacheLayers));
  field("kv_cache_row", Twine(fields.kvCacheRow));
  field("generation_arena_bytes", Twine(fields.generationArenaBytes));
  field("tensor_parallel_size", Twine(parallelPlan->tp));
  field("pipeline_parallel_size", Twine(parallelPlan->pp));
  field("data_parallel_size", Twine(parallelPlan->dp));
  field("expert_parallel_size", Twine(parallelPlan->ep));
  field("stages", fields.stages);
  field("num_microbatches", Twine(fields.numMicrobatches));
  field("pipeline_schedule", fields.schedule);
  field("virtual_pipeline_size", Twine(fields.virtualStages));
  field("device", cuda ? "megart::cuda::device" : "nullptr");
  field("overlap_grad_reduce", overlaps ? "true" : "false");
  field("overlap_param_gather", gathersOverlap ? "true" : "false");
  field("hf_config_json", options.hfConfigJson.empty() ? "nullptr" : cString(options.hfConfigJson));
  field("spec_yaml", options.specYaml.empty() ? "nullptr" : cString(options.specYaml));
  field("recompile_command", options.recompileCommand.empty() ? "nullptr" : cString(options.recompileCommand));
  field("adapter_config_json", options.adapterConfigJson.empty() ? "nullptr" : cString(options.adapterConfigJson));
  field("compiled_precision", cString(activationPrecisionName(options.precision)));
  os << "};\n\n} // namespace\n\n"
     << "int main(int argc, char **argv) { return megart::train_main(argc, argv, kProgram); }\n";
  return success();
}
