// What megac compile, simulate and plan share: a plan checked against the spec, compiled for
// simulation (every pass of megac compile, nothing written), and simulated on a cluster.
#pragma once

#include "megac/Frontend/ModelSpec.h"
#include "megac/Plan/ParallelPlan.h"
#include "megac/Sim/Simulate.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace megac {

/// The flags megac simulate and megac plan share, checked: --cluster (loaded), --attention-backend,
/// --grad-reduce-in-bf16 (as costing options), --bf16 / --fp16 and --global-batch-size (0: not
/// given). Defined with the flags, in CompileCommand.cpp.
struct SimulationFlags {
  sim::Cluster cluster;
  sim::SimulationInputs options;
  ActivationPrecision precision = ActivationPrecision::Fp32;
  int64_t globalBatch = 0;
};
llvm::Expected<SimulationFlags> simulationFlags();

/// megac compile's checks of `plan` (from flags: resolvePipeline not yet called) against the spec
/// and the micro batch, before any IR is built; resolves the pipeline's layout into `plan`.
llvm::Error checkPlanAgainstSpec(ParallelPlan &plan, const ModelSpec &spec, int64_t microBatch);

/// `plan` checked (checkPlanAgainstSpec), the model built and the whole pass pipeline run (the IR
/// verified once, after the last pass).
/// Errors say why the compiler refuses the plan.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> compileForSimulation(mlir::MLIRContext &context,
                                                                       const ModelSpec &spec, ParallelPlan &plan,
                                                                       int64_t microBatch);

/// One iteration of the compiled `module` on `cluster`: its memory plan (what megac compile
/// prints) and the cost model's replay. `options` says how to cost (attention backend, 16-bit
/// gradient sums, trace); the batch, sequence and FLOPs come from the arguments.
sim::Simulation simulateModule(mlir::ModuleOp module, const ParallelPlan &plan, const ModelSpec &spec,
                               int64_t microBatch, int64_t globalBatch, const sim::Cluster &cluster,
                               sim::SimulationInputs options);

} // namespace megac
