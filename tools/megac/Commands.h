#pragma once

#include "llvm/ADT/ArrayRef.h"

namespace megac {

/// megac's command line as it was typed (argv), for the commands that record it.
llvm::ArrayRef<const char *> invocation();

/// `megac compile SPEC.yaml -o OUT [plan flags]`: spec -> IR -> passes -> C++ -> OUT/train;
/// `megac simulate SPEC.yaml --cluster FILE.yaml --global-batch-size B [plan flags]`: the same
/// passes, then one iteration simulated on the cluster.
int runCompile();

/// `megac data --input FILE... --output-prefix PREFIX`: text or JSON lines -> Megatron indexed dataset(s).
int runData();

/// `megac plan SPEC.yaml --gpus N --cluster C --global-batch-size B`: the fastest plans that fit.
int runPlan();

/// `megac calibrate --target cpu -o FILE.yaml`: this machine's speeds as a cluster file.
int runCalibrate();

/// `megac generate CHECKPOINT --prompt TEXT`: the checkpoint's model continues the text.
int runGenerate();

} // namespace megac
