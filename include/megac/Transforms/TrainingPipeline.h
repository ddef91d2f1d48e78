// The one pass pipeline from the frontend's module (the model's forward and the plan in @grid)
// to the module the emitters turn into C++. `megac compile` runs it; megac-opt registers it as
// --megac-training-pipeline, so a dump can be replayed by hand.
#pragma once

#include "mlir/Pass/PassManager.h"

namespace megac {

/// Adds the passes in order. Every pass is there for every plan and reads the plan from the IR;
/// a pass with nothing to do for a plan (megac-pipeline-split without pp) leaves the IR as it is.
void buildTrainingPipeline(mlir::OpPassManager &pm);

/// The passes from the frontend's module built for one position (seq_length 1) to generation's
/// decode_step and its layers' functions, as the emitter prints them beside the training step.
void buildDecodePipeline(mlir::OpPassManager &pm);

/// --megac-training-pipeline for megac-opt.
void registerTrainingPipeline();

} // namespace megac
