// The flags megac simulate and megac plan share, checked (defined with the flags, in
// CompileCommand.cpp): --cluster (loaded), --attention-backend, --grad-reduce-in-bf16 (as costing
// options), --bf16 / --fp16 and --global-batch-size (0: not given).
#pragma once

#include "megac/Plan/ParallelPlan.h"
#include "megac/Sim/Simulate.h"

#include "llvm/Support/Error.h"

namespace megac {

struct SimulationFlags {
  sim::Cluster cluster;
  sim::SimulationInputs options;
  ActivationPrecision precision = ActivationPrecision::Fp32;
  int64_t globalBatch = 0;
};
llvm::Expected<SimulationFlags> simulationFlags();

} // namespace megac
