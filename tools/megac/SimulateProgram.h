// What megac simulate and megac plan share: a plan compiled for simulation (every pass of megac
// compile, nothing written) and the compiled module simulated on a cluster.
#pragma once

#include "megac/Frontend/ModelSpec.h"
#include "megac/Plan/ParallelPlan.h"
#include "megac/Sim/Simulate.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace megac {

/// `plan` (from flags: resolvePipeline not yet called) checked as megac compile checks it, the
/// model built and the whole pass pipeline run. Errors say why the compiler refuses the plan.
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
