#include "megac/Driver/Compile.h"

#include "megac/Frontend/BuildModel.h"
#include "megac/Frontend/ModelFlops.h"
#include "megac/Frontend/ModelSize.h"
#include "megac/Frontend/PlanChecks.h"
#include "megac/Plan/RecomputeFlags.h"
#include "megac/Analysis/RankMemory.h"
#include "megac/Analysis/StageBuffers.h"
#include "megac/Transforms/TrainingPipeline.h"

#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace megac {

Error checkPlanAgainstSpec(ParallelPlan &plan, const ModelSpec &spec, int64_t microBatch) {
  if (Error e = resolvePipeline(plan, spec))
    return e;
  if (Error e = validatePlan(plan, spec))
    return e;
  if (Error e = checkRecomputeLayers(plan, spec.numLayers))
    return e;
  return checkProgramSize(spec, plan, microBatch);
}

Expected<mlir::OwningOpRef<mlir::ModuleOp>> compile(mlir::MLIRContext &context, const ModelSpec &spec,
                                                    const ParallelPlan &plan, const CompileOptions &options) {
  if (plan.pp > 1 && (!plan.pipelineSchedule || plan.numMicrobatches < 1 || plan.vpp < 1))
    return createStringError("internal: a pipeline plan without its schedule, microbatches or chunks; check it "
                             "with checkPlanAgainstSpec before compiling");
  mlir::OwningOpRef<mlir::ModuleOp> module = buildModel(context, spec, plan, options.microBatch);
  if (failed(mlir::verify(*module)))
    return createStringError("internal: the frontend built invalid IR for " + spec.path);
  if (options.onFrontend && !options.onFrontend(*module))
    return createStringError("stopped after the frontend (see the error above)");
  mlir::PassManager pm(&context);
  buildTrainingPipeline(pm);
  pm.enableVerifier(options.verifyEachPass);
  if (options.instrument)
    options.instrument(pm);
  if (failed(pm.run(*module)))
    return createStringError("the pass pipeline failed (see the error above)");
  if (!options.verifyEachPass && options.verifyResult && failed(mlir::verify(*module)))
    return createStringError("internal: the passes built invalid IR for " + spec.path);
  return std::move(module);
}

sim::Simulation simulate(mlir::ModuleOp module, const ParallelPlan &plan, const ModelSpec &spec, int64_t microBatch,
                         int64_t globalBatch, const sim::Cluster &cluster, sim::SimulationInputs options) {
  // The memory plan needs the sizes of what the program allocates, read from the IR: the
  // program's text is not needed.
  FailureOr<SmallVector<StageBuffers>> buffers = stageBuffers(module);
  if (failed(buffers))
    report_fatal_error("megac: sizing the buffers of a program the passes accepted failed");
  SmallVector<StageStateMemory> memory = stateMemory(module, plan);
  addProgramBuffers(memory, *buffers);
  options.globalBatch = globalBatch;
  options.microBatch = microBatch;
  options.seqLength = spec.seqLength;
  options.modelFlopsPerSample = modelFlopsPerSample(spec);
  options.sixteenBitGemms = plan.precision != ActivationPrecision::Fp32;
  return sim::simulate(module, plan, cluster, options, memory);
}

} // namespace megac
