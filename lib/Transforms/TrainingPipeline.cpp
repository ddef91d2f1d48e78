#include "megac/Transforms/TrainingPipeline.h"

#include "megac/Pipeline/Passes.h"
#include "megac/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void megac::buildTrainingPipeline(mlir::OpPassManager &pm) {
  pm.addPass(createLora());
  pm.addPass(createAutocast());
  pm.addPass(createExpertParallel());
  pm.addPass(createAutodiff());
  // The backward pass repeats a view for each of its users (the reshape of a norm output for
  // the q, k and v weight gradients); one is enough.
  pm.addPass(mlir::createCSEPass());
  pm.addPass(createRecompute());
  pm.addPass(createShardPropagate());
  pm.addPass(createShardLocalize());
  pm.addPass(createTensorParallel());
  pm.addPass(createPipelineSplit());
  pm.addPass(pipeline::createPipelineSchedule());
  pm.addPass(createDataParallel());
  pm.addPass(createFuseEpilogues());
  pm.addPass(createFuseNf4Loads());
  pm.addPass(createDeriveSteps());
  pm.addPass(createPlanWorkspace());
}

void megac::buildDecodePipeline(mlir::OpPassManager &pm) {
  pm.addPass(createDeriveDecodeStep());
  pm.addPass(createPlanWorkspace());
}

void megac::registerTrainingPipeline() {
  mlir::PassPipelineRegistration<>("megac-training-pipeline",
                                   "megac compile's passes, in order: lora, autocast, expert-parallel, autodiff, cse, recompute, shard-propagate, "
                                   "shard-localize, tensor-parallel, pipeline-split, "
                                   "pipeline-schedule, data-parallel, fuse-epilogues, fuse-nf4-loads, derive-steps, "
                                   "plan-workspace (the plan comes from @grid)",
                                   buildTrainingPipeline);
}
